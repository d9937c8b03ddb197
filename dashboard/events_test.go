package dashboard_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/dashboard"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// sseEvent is one event, or comment, read from an event stream, with the
// time it arrived.
type sseEvent struct {
	id, event, data, comment string
	at                       time.Time
}

func (ev sseEvent) decode(t *testing.T) dashboard.StreamEvent {
	t.Helper()
	var se dashboard.StreamEvent
	if err := json.Unmarshal([]byte(ev.data), &se); err != nil {
		t.Fatalf("event data %q: %v", ev.data, err)
	}
	return se
}

// stream is an open GET /api/v1/events.
type stream struct {
	t      *testing.T
	name   string
	events chan sseEvent
	// stop closes the stream and waits for its reader to end.
	stop func()
}

// openStream opens an event stream of the test server and reads it in the
// background until the test ends. It returns once the server has answered:
// from then on the stream receives every notification.
func (e *env) openStream(name, token, lastEventID string) *stream {
	e.t.Helper()
	return openStreamAt(e.t, e.http.URL, name, token, lastEventID)
}

func openStreamAt(t *testing.T, base, name, token, lastEventID string) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		hr.Header.Set("Authorization", "Bearer "+token)
	}
	if lastEventID != "" {
		hr.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(hr) //nolint:bodyclose // closed by the reading goroutine below, or on a bad status
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		cancel()
		resp.Body.Close()
		t.Fatalf("stream %s: %d %s", name, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	done := make(chan struct{})
	s := &stream{t: t, name: name, events: make(chan sseEvent, 1000), stop: func() {
		cancel()
		<-done
	}}
	go func() {
		defer close(done)
		defer close(s.events)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev != (sseEvent{}) {
					ev.at = time.Now()
					s.events <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, ":"):
				ev.comment = strings.TrimSpace(line[1:])
			case strings.HasPrefix(line, "id: "):
				ev.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[6:]
			}
		}
	}()
	t.Cleanup(s.stop)
	return s
}

// next returns the next event (not comment) that matches, failing the test
// if none arrives before the deadline or the stream ends.
func (s *stream) next(timeout time.Duration, match func(sseEvent) bool) sseEvent {
	s.t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				s.t.Fatalf("stream %s ended", s.name)
			}
			if ev.comment == "" && match(ev) {
				return ev
			}
		case <-deadline.C:
			s.t.Fatalf("stream %s: no matching event within %s", s.name, timeout)
		}
	}
}

func ofRun(id, typ string) func(sseEvent) bool {
	return func(ev sseEvent) bool {
		var se dashboard.StreamEvent
		return ev.event == typ && json.Unmarshal([]byte(ev.data), &se) == nil && se.RunID == id
	}
}

// drain returns the events received so far, without waiting.
func (s *stream) drain() []sseEvent {
	var out []sseEvent
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				return out
			}
			if ev.comment == "" {
				out = append(out, ev)
			}
		default:
			return out
		}
	}
}

func TestEventStream(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	alice := e.openStream("alice", aliceToken, "")
	bob := e.openStream("bob", bobToken, "")
	root := e.openStream("root", rootToken, "")

	// alice's run fails at transform after both its attempts.
	resp := e.do(req{method: "POST", path: "/api/v1/workflows", token: aliceToken,
		body: `{"workflow":"demo","input":{"fail_step":"transform","fail_times":5}}`})
	var run workflow.Run
	resp.decode(t, &run)

	retry := alice.next(10*time.Second, ofRun(run.ID, "retry_scheduled")).decode(t)
	if retry.Details["step"] != "transform" || retry.Details["due_at"] == "" {
		t.Errorf("retry_scheduled: %+v", retry)
	}
	stepEv := alice.next(10*time.Second, ofRun(run.ID, "step_failed"))
	runEv := alice.next(10*time.Second, ofRun(run.ID, "run_failed"))
	failed, err := e.client.Get(context.Background(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if failed.Status != workflow.StatusFailed || failed.FinishedAt == nil {
		t.Fatalf("run %+v, want failed", failed)
	}
	// Live, not at some slow poll: the hub's read blocks for HubBlock (1s)
	// and returns at once when an entry comes. Five times that is a
	// ceiling a loaded machine's delays to the Redis and HTTP hops do not
	// reach, where a stream that polled every few seconds would miss it.
	for _, ev := range []sseEvent{stepEv, runEv} {
		if lag, limit := ev.at.Sub(*failed.FinishedAt), 5*dashboard.HubBlock; lag > limit {
			t.Errorf("%s arrived %s after the run failed, want within %s", ev.event, lag, limit)
		}
	}
	se := stepEv.decode(t)
	if se.Owner != "alice" || se.Details["step"] != "transform" || se.CanRetry == nil || !*se.CanRetry ||
		se.CanSkip == nil || *se.CanSkip || se.ID != stepEv.id {
		t.Errorf("step_failed: %+v", se)
	}
	if re := runEv.decode(t); re.Details["message"] != "step failed after multiple attempts" || re.Details["code"] != workflow.CodeRetriesExhausted {
		t.Errorf("run_failed: %+v", re)
	}

	// bob's run succeeds; bob's stream carries it and nothing of alice's.
	bobRun := e.start("bob", inputOK)
	bob.next(10*time.Second, ofRun(bobRun.ID, "run_succeeded"))
	root.next(10*time.Second, ofRun(run.ID, "run_failed"))
	root.next(10*time.Second, ofRun(bobRun.ID, "run_succeeded"))
	for _, ev := range bob.drain() {
		if se := ev.decode(t); se.Owner != "bob" || se.RunID == run.ID {
			t.Errorf("bob's stream carries %s of %s's run %s", ev.event, se.Owner, se.RunID)
		}
	}
	for _, ev := range alice.drain() {
		if se := ev.decode(t); se.Owner != "alice" || se.RunID == bobRun.ID {
			t.Errorf("alice's stream carries %s of %s's run %s", ev.event, se.Owner, se.RunID)
		}
	}

	// Resuming after step_failed starts with the next of alice's events.
	resumed := e.openStream("alice resumed", aliceToken, stepEv.id)
	if ev := resumed.next(15*time.Second, func(sseEvent) bool { return true }); ev.id != runEv.id {
		t.Errorf("resumed stream starts with %s %s, want run_failed %s", ev.event, ev.id, runEv.id)
	}
}

func TestEventStreamHeartbeat(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{heartbeat: 20 * time.Millisecond, noWorker: true})
	s := e.openStream("alice", aliceToken, "")
	deadline := time.NewTimer(15 * time.Second)
	defer deadline.Stop()
	for {
		select {
		case ev := <-s.events:
			if ev.comment == "heartbeat" {
				return
			}
		case <-deadline.C:
			t.Fatal("no heartbeat within 15s")
		}
	}
}

// TestServeShutsDownWithOpenStreams: ListenAndServe's graceful shutdown
// ends open event streams rather than wait for them.
func TestServeShutsDownWithOpenStreams(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorker: true})
	toks, err := dashboard.ParseTokens(strings.NewReader(tokensFile), "tokens")
	if err != nil {
		t.Fatal(err)
	}
	s, err := dashboard.New(dashboard.Config{Client: e.client, Redis: e.rdb, Tokens: toks, Logger: testkit.LoggerTo(t, newSyncBuffer())})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	st := openStreamAt(t, "http://"+ln.Addr().String(), "alice", aliceToken, "")
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Serve did not return within 15s of its context's end")
	}
	deadline := time.NewTimer(15 * time.Second)
	defer deadline.Stop()
	for open := true; open; {
		select {
		case _, open = <-st.events: // the stream ends
		case <-deadline.C:
			t.Fatal("the event stream is still open 15s after the shutdown")
		}
	}
	if resp, err := http.Get("http://" + ln.Addr().String() + "/healthz"); err == nil {
		resp.Body.Close()
		t.Fatal("the server still answers")
	}
}
