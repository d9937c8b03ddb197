package cli_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// commonPrefix returns the longest prefix a and b share.
func commonPrefix(a, b string) string {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return a[:n]
}

// uniquePrefix returns the shortest prefix of id, at least 4 characters,
// that no other of ids starts with.
func uniquePrefix(id string, ids []string) string {
	for n := 4; n < len(id); n++ {
		p := id[:n]
		if !slices.ContainsFunc(ids, func(o string) bool { return o != id && strings.HasPrefix(o, p) }) {
			return p
		}
	}
	return id
}

// statusID returns the run ID status --json printed.
func statusID(t *testing.T, r result) string {
	t.Helper()
	mustSucceed(t, r)
	var run workflow.Run
	decode(t, r.stdout, &run)
	return run.ID
}

func TestRunIDPrefixAndLast(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(fastPolicy())

	checkOneErrorLine(t, e.run("status", "--last"), 2, `--last: queue "`+e.queue+`" has no run`)

	// Runs whose IDs share 4 characters or more (the same 12 days).
	var ids []string
	for len(ids) < 2 || len(commonPrefix(ids[len(ids)-2], ids[len(ids)-1])) < 4 {
		ids = append(ids, runID(t, e.run("start", "demo", "--wait")))
	}
	older, newer := ids[len(ids)-2], ids[len(ids)-1]
	shared := commonPrefix(older, newer)

	for _, id := range ids {
		p := uniquePrefix(id, ids)
		if got := statusID(t, e.run("status", p, "--json")); got != id {
			t.Errorf("status %s: run %s, want %s", p, got, id)
		}
		byPrefix, byID := e.run("events", p), e.run("events", id)
		mustSucceed(t, byPrefix)
		if byPrefix.stdout != byID.stdout {
			t.Errorf("events %s differs from events %s:\n%s\n%s", p, id, byPrefix.stdout, byID.stdout)
		}
	}
	if got := statusID(t, e.run("status", "--last", "--json")); got != newer {
		t.Errorf("status --last: run %s, want the newest, %s", got, newer)
	}
	if r := e.run("status", "--last"); !strings.Contains(r.stdout, newer) {
		t.Errorf("status --last:\n%v", r)
	}

	// An ambiguous prefix lists the runs it matches.
	r := e.run("status", shared)
	checkOneErrorLine(t, r, 2, `ambiguous run ID prefix "`+shared+`": it matches `)
	for _, id := range []string{older, newer} {
		if !strings.Contains(r.stderr, id+" (demo, succeeded, created ") {
			t.Errorf("the error does not list %s: %q", id, r.stderr)
		}
	}
	if strings.Index(r.stderr, newer) > strings.Index(r.stderr, older) {
		t.Errorf("the newest run is not listed first: %q", r.stderr)
	}

	// A prefix no run has.
	none := shared
	for _, c := range "0123456789abcdefghjkmnpqrstvwxyz" {
		p := shared + string(c)
		if !slices.ContainsFunc(ids, func(id string) bool { return strings.HasPrefix(id, p) }) {
			none = p
			break
		}
	}
	checkOneErrorLine(t, e.run("status", none), 2, `run not found: no run ID on queue "`+e.queue+`" starts with "`+none+`"`)

	// Arguments the CLI refuses before it connects.
	checkOneErrorLine(t, e.run("status", older[:3]), 2, `invalid run ID "`+older[:3]+`": want the 26-character ID`)
	checkOneErrorLine(t, e.run("status", strings.ToUpper(older[:8])), 2, "invalid run ID")
	checkOneErrorLine(t, e.run("status", "--last", older), 2, `status: unexpected argument "`+older+`": --last names the run`)
	checkOneErrorLine(t, e.run("events"), 2, "events: missing run ID, or --last")
	checkOneErrorLine(t, e.run("signal", "--last"), 2, "want a run ID and a signal name, or --last and a signal name")

	// cancel by prefix and by --last.
	slow := runID(t, e.run("start", "demo", "--input", `{"step_sleep_ms":60000}`))
	if got := statusID(t, e.run("status", "--last", "--json")); got != slow {
		t.Fatalf("status --last: %s, want the run just started, %s", got, slow)
	}
	r = e.run("cancel", "--last")
	mustSucceed(t, r)
	if r.stdout != "cancelled "+slow+"\n" {
		t.Errorf("cancel --last printed %q", r.stdout)
	}
	checkOneErrorLine(t, e.run("cancel", uniquePrefix(newer, append(ids, slow))), 1,
		"run "+newer+" already finished (succeeded)")
}

// TestSignalByPrefix: signal takes a prefix, and --last with the signal
// name alone.
func TestSignalByPrefix(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(fastPolicy(), workflow.Definition{Name: "approve", Steps: []workflow.Step{
		{Name: "approval", Await: &workflow.Await{Signal: "approved", Timeout: time.Hour}},
	}})
	var ids []string
	for range 2 {
		id := runID(t, e.run("start", "approve"))
		ids = append(ids, id)
		testkit.Eventually(t, 30*time.Second, "the await to wait", func() bool {
			return e.get(id).Step("approval").Status == workflow.StepWaiting
		})
	}
	r := e.run("signal", "--last", "approved")
	mustSucceed(t, r)
	if !strings.HasPrefix(r.stdout, "delivered approved to "+ids[1]+": step approval done") {
		t.Errorf("signal --last printed %q", r.stdout)
	}
	p := uniquePrefix(ids[0], ids)
	r = e.run("signal", p, "approved")
	mustSucceed(t, r)
	if !strings.HasPrefix(r.stdout, "delivered approved to "+ids[0]+": step approval done") {
		t.Errorf("signal %s printed %q", p, r.stdout)
	}
	for _, id := range ids {
		e.waitStatus(id, workflow.StatusSucceeded)
	}
}

// TestOperatorWait: recover, retry and skip --wait wait for the run as
// start --wait does, showing only what follows the action.
func TestOperatorWait(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startOptionalWorker()

	// recover --wait: fetch fails 5 times, the run after 4; the recovery
	// succeeds at attempt 6.
	id := runID(t, e.run("start", "demo", "--input", `{"fail_step":"fetch","fail_times":5}`))
	e.waitStatus(id, workflow.StatusFailed)
	r := e.run("recover", uniquePrefix(id, []string{id}), "--wait")
	mustSucceed(t, r)
	if !strings.HasPrefix(r.stdout, "recovered "+id+": running, at step fetch\n") {
		t.Errorf("recover --wait printed %q", r.stdout)
	}
	for _, want := range []string{"fetch: attempt 6 succeeded", "deliver: attempt 1 succeeded", "run " + id + " succeeded"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("recover --wait: no %q on stderr:\n%s", want, r.stderr)
		}
	}
	// The journal before the recovery is not shown again.
	for _, old := range []string{"run " + id + " of demo started", "fetch: attempt 1 started", "fetch: attempt 4 failed"} {
		if strings.Contains(r.stderr, old) {
			t.Errorf("recover --wait showed %q, from before the recovery:\n%s", old, r.stderr)
		}
	}

	// retry --wait of a step that fails again: exit 1, the failure as
	// the error line; --json prints the run as it ended.
	id2 := runID(t, e.run("start", "demo", "--input", `{"fail_step":"transform","fail_times":100}`))
	e.waitStatus(id2, workflow.StatusFailed)
	r = e.run("retry", id2, "--step", "transform", "--wait", "--json")
	if r.code != 1 {
		t.Fatalf("retry --wait of a step that fails again: %v", r)
	}
	var ended workflow.Run
	decode(t, r.stdout, &ended)
	if ended.ID != id2 || ended.Status != workflow.StatusFailed || ended.Step("transform").Attempts != 8 {
		t.Errorf("retry --wait --json: %s %s, transform attempts %d; want %s failed after 8", ended.ID, ended.Status,
			ended.Step("transform").Attempts, id2)
	}
	if last := lastLine(r.stderr); !strings.HasPrefix(last, "enqueue: run "+id2+" failed: ") {
		t.Errorf("last stderr line %q", last)
	}
	if !strings.Contains(r.stderr, "transform: attempt 5 started") || strings.Contains(r.stderr, "transform: attempt 4 started") {
		t.Errorf("retry --wait progress:\n%s", r.stderr)
	}

	// skip --wait --last: the optional step of the newest run.
	id3 := runID(t, e.run("start", "notifying"))
	e.waitStatus(id3, workflow.StatusFailed)
	r = e.run("skip", "--last", "--step", "notify", "--wait")
	mustSucceed(t, r)
	if !strings.HasPrefix(r.stdout, "skipped step of "+id3+": succeeded") || !strings.Contains(r.stderr, "run "+id3+" succeeded") {
		t.Errorf("skip --wait: %v", r)
	}
	// A refused action does not wait.
	checkOneErrorLine(t, e.run("recover", id3, "--wait"), 1, "recover refused")
}

func TestRunIDPrefixNeedsRedisForTheOutbox(t *testing.T) {
	t.Parallel()
	addr := testkit.FreeAddr(t)
	environ := []string{"CAIRN_REDIS_URL=redis://" + addr, "CAIRN_OUTBOX=" + t.TempDir() + "/outbox"}
	r := invoke(t, invocation{args: []string{"signal", "01kabcde", "approved"}, environ: environ})
	checkOneErrorLine(t, r, 1, `cannot resolve run ID prefix "01kabcde" without Redis at `+addr)
	if !strings.Contains(r.stderr, "give the whole run ID to queue in the outbox") {
		t.Errorf("no hint: %q", r.stderr)
	}
	// A whole run ID is queued.
	id := workflow.NewRunID(time.Now())
	r = invoke(t, invocation{ctx: context.Background(), args: []string{"signal", id, "approved"}, environ: environ})
	mustSucceed(t, r)
	if !strings.HasPrefix(r.stdout, "queued signal approved for "+id+" in the outbox") {
		t.Errorf("signal of a whole ID without Redis: %v", r)
	}
}
