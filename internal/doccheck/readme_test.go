package doccheck

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// TestReadmeExample runs the README's "Use it from Go" against a
// redis-server of its own: the client starts a run at once, whether or not
// the worker just started has published the definition yet (without
// ClientConfig.Definitions, the Start usually fails: ErrUnknownWorkflow);
// the run succeeds after a retry of a transient error, with the step's
// output; a permanent error fails a run at its first attempt; and the
// worker stops when ctx ends.
// Not in parallel: it sets slog's default logger, and waits for the
// goroutines the snippet started, by difference.
func TestReadmeExample(t *testing.T) {
	srv := redistest.Start(t, nil)
	redisAddr := srv.Addr()
	quietDefaultLogger(t) // the snippet's worker and client log through slog.Default()
	before := goleak.IgnoreCurrent()

	// What the snippet calls: an accounts service whose first call fails
	// (a transient error, retried) and which refuses a taken email, and
	// the welcome email.
	var calls atomic.Int32
	var taken atomic.Bool
	accounts := struct {
		Create        func(ctx context.Context, key string) (string, error)
		ErrEmailTaken error
	}{ErrEmailTaken: errors.New("email taken")}
	accounts.Create = func(_ context.Context, key string) (string, error) {
		switch {
		case calls.Add(1) == 1:
			return "", errors.New("accounts: connection reset")
		case taken.Load():
			return "", accounts.ErrEmailTaken
		}
		return "acct-" + key, nil
	}
	welcomed := make(chan string, 2)
	sendWelcome := func(_ context.Context, sc *workflow.StepContext) (any, error) {
		var created map[string]string
		if err := sc.DecodeOutput("create_account", &created); err != nil {
			return nil, err
		}
		welcomed <- created["account_id"]
		return nil, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// snippet: readme-signup (redisAddr => "127.0.0.1:6379")
	def := workflow.Definition{
		Name:   "signup",
		Policy: workflow.Policy{MaxAttempts: 5, InitialInterval: 500 * time.Millisecond},
		Steps: []workflow.Step{
			{Name: "create_account", Run: func(ctx context.Context, sc *workflow.StepContext) (any, error) {
				id, err := accounts.Create(ctx, sc.IdempotencyKey) // same key on every execution of this attempt
				if errors.Is(err, accounts.ErrEmailTaken) {
					return nil, workflow.Permanent(err) // no retry: the run fails and needs attention
				}
				return map[string]string{"account_id": id}, err // other errors are retried
			}},
			{Name: "send_welcome_email", Optional: true, Run: sendWelcome},
		},
	}

	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	w, _ := workflow.NewWorker(rdb, workflow.WorkerConfig{Concurrency: 20})
	_ = w.Register(def)
	go w.Run(ctx) // until ctx is done; then a graceful shutdown

	// The client knows def, so it can start runs before the worker has published it.
	client := workflow.NewClient(rdb, workflow.ClientConfig{Definitions: []workflow.Definition{def}})
	run, err := client.Start(ctx, "signup", map[string]string{"email": "a@example.com"},
		&workflow.StartOptions{IdempotencyKey: "signup-a@example.com"})
	// end snippet
	if err != nil {
		t.Fatal(err)
	}

	run = testkit.WaitRun(t, client, run.ID, deadline)
	if run.Status != workflow.StatusSucceeded {
		t.Fatalf("run %s: %s (%s), want succeeded", run.ID, run.Status, run.FailureReason)
	}
	step := run.Step("create_account")
	var out map[string]string
	if err := json.Unmarshal(step.Output, &out); err != nil {
		t.Fatalf("create_account's output %s: %v", step.Output, err)
	}
	// The failed first attempt was retried: attempt 2's key made the account.
	if want := "acct-" + run.ID + ":create_account:2"; out["account_id"] != want || step.Attempts != 2 {
		t.Errorf("create_account: output %s after %d attempts, want account_id %q after 2", step.Output, step.Attempts, want)
	}
	if got := <-welcomed; got != out["account_id"] {
		t.Errorf("welcome email for %q, want %q", got, out["account_id"])
	}

	// A taken email is permanent: one attempt, and the run fails.
	taken.Store(true)
	run, err = client.Start(ctx, "signup", map[string]string{"email": "b@example.com"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	run = testkit.WaitRun(t, client, run.ID, deadline)
	if step := run.Step("create_account"); run.Status != workflow.StatusFailed ||
		run.FailureCode != workflow.CodePermanentError || step.Attempts != 1 {
		t.Errorf("run with a taken email: %s (%s) after %d attempts, want failed (permanent_error) after 1",
			run.Status, run.FailureCode, step.Attempts)
	}

	// The worker stops when ctx ends.
	cancel()
	waitGoroutines(t, before)
	if err := rdb.Close(); err != nil {
		t.Error(err)
	}
}
