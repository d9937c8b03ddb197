package workflow_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/demo"
	"github.com/cairnhq/cairn/internal/outbox"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// dupMarshaler marshals to an object with a key twice.
type dupMarshaler struct{}

func (dupMarshaler) MarshalJSON() ([]byte, error) { return []byte(`{"a":1,"a":2}`), nil }

// Inputs that readers take differently: each is refused, saying where.
var ambiguousInputs = []struct {
	name  string
	input any
	want  string
}{
	{"duplicate key", json.RawMessage(`{"user": {"name": "a", "name": "b"}}`), `user.name: duplicate key "name" at byte 23`},
	{"duplicate key, escaped", []byte(`{"a": 1, "\u0061": 2}`), `a: duplicate key "a" at byte 9`},
	{"invalid UTF-8", []byte("{\"name\": \"caf\xe9\"}"), `name: invalid UTF-8 in a string (byte 0xe9) at byte 13`},
	{"lone surrogate", json.RawMessage(`{"tags": ["ok", "\ud800"]}`), `tags[1]: lone surrogate \ud800 in a string at byte 17`},
	{"marshaler", dupMarshaler{}, `a: duplicate key "a" at byte 7`},
}

// TestStartRefusesAmbiguousJSON: Start and StartMany refuse run input with
// invalid UTF-8, a lone surrogate or a duplicate key, with ErrInvalidInput
// and where it is, and write nothing; a client with an outbox and Redis
// down does not queue it either.
func TestStartRefusesAmbiguousJSON(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	publishedEngine(t, e.rdb, workflow.EngineConfig{Queue: e.queue, Logger: e.log}, demo.Definition(fastPolicy()))
	var reqs []workflow.StartRequest
	for _, c := range ambiguousInputs {
		_, err := e.client.Start(ctxb, demo.Name, c.input, nil)
		if !errors.Is(err, workflow.ErrInvalidInput) || !strings.HasSuffix(err.Error(), c.want) {
			t.Errorf("Start, %s: %v, want ErrInvalidInput ending %q", c.name, err, c.want)
		}
		reqs = append(reqs, workflow.StartRequest{Workflow: demo.Name, Input: c.input})
	}
	reqs = append(reqs, workflow.StartRequest{Workflow: demo.Name, Input: json.RawMessage(`{"name": "caf\u00e9 \ud83d\ude00"}`)})
	res := workflow.NewClient(e.rdb, workflow.ClientConfig{Queue: e.queue, Logger: e.log}).StartMany(ctxb, reqs)
	for i, c := range ambiguousInputs {
		if !errors.Is(res[i].Err, workflow.ErrInvalidInput) || !strings.HasSuffix(res[i].Err.Error(), c.want) {
			t.Errorf("StartMany, %s: %v, want ErrInvalidInput ending %q", c.name, res[i].Err, c.want)
		}
	}
	good := res[len(res)-1]
	if good.Err != nil {
		t.Fatalf("StartMany, valid input: %v", good.Err)
	}
	keys, err := e.rdb.Keys(ctxb, fmt.Sprintf("cairn:{%s}:run:*", e.queue)).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if !strings.Contains(k, good.Run.ID) {
			t.Errorf("a refused start wrote %s, want only run %s's keys", k, good.Run.ID)
		}
	}

	r := newOBRig(t)
	off := r.down(workflow.ClientConfig{})
	for _, c := range ambiguousInputs {
		if _, err := off.Start(ctxb, "ob", c.input, nil); !errors.Is(err, workflow.ErrInvalidInput) {
			t.Errorf("Start with an outbox and Redis down, %s: %v, want ErrInvalidInput", c.name, err)
		}
		if _, err := off.Signal(ctxb, workflow.NewRunID(time.Now()), "go", c.input, nil); !errors.Is(err, workflow.ErrInvalidInput) {
			t.Errorf("Signal with an outbox and Redis down, %s: %v, want ErrInvalidInput", c.name, err)
		}
	}
	if st, err := off.OutboxStats(); err != nil || st.Entries != 0 {
		t.Errorf("outbox holds %d entries (%v), want none", st.Entries, err)
	}
}

// TestOutboxDeadLettersAmbiguousJSON: a queued start or signal whose JSON
// Start and Signal would refuse (an outbox written before they checked
// it) becomes a dead letter when flushed; nothing reaches Redis.
func TestOutboxDeadLettersAmbiguousJSON(t *testing.T) {
	t.Parallel()
	r := newOBRig(t)
	run, err := r.plain.Start(ctxb, "ob", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	box, err := outbox.Open(r.path, outbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []workflow.OutboxEntry{
		{Kind: workflow.OutboxStart, RunID: workflow.NewRunID(time.Now()), Workflow: "ob",
			Input: json.RawMessage(`{"a": 1, "a": 2}`), QueuedAt: time.Now()}, // stored compact
		{Kind: workflow.OutboxSignal, RunID: run.ID, Signal: "go", SignalID: "s1",
			Payload: json.RawMessage(`"\udc00"`), QueuedAt: time.Now()},
	} {
		v, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := box.Append(v); err != nil {
			t.Fatal(err)
		}
	}
	if err := box.Close(); err != nil {
		t.Fatal(err)
	}
	on := r.open(r.rdb, workflow.ClientConfig{})
	testkit.Eventually(t, 10*time.Second, "the outbox to be flushed", func() bool {
		st, err := on.OutboxStats()
		return err == nil && st.Entries == 0
	})
	contents, err := on.Outbox()
	if err != nil {
		t.Fatal(err)
	}
	if len(contents.Dead) != 2 || !strings.Contains(contents.Dead[0].DeadReason, `a: duplicate key "a" at byte 7`) ||
		!strings.Contains(contents.Dead[1].DeadReason, `lone surrogate \udc00 in a string at byte 1`) {
		t.Fatalf("dead letters %+v, want both, saying why", contents.Dead)
	}
	if n := r.count(); n != 1 {
		t.Errorf("%d runs, want 1: the queued start was applied", n)
	}
	evs, err := r.plain.Events(ctxb, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Type == "signal_received" {
			t.Errorf("the queued signal reached the run: %+v", ev)
		}
	}
}
