package tasks_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/tasks"
)

const runID = "01jq6w8k3x0000000000000000"

func TestIDRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		run                 string
		index, attempt, gen int
		want                string
	}{
		{runID, 0, 1, 0, runID + "_s0_a1"},
		{runID, 2, 5, 0, runID + "_s2_a5"},
		{runID, 0, 1, 1, runID + "_s0_a1_g1"},
		{runID, 12, 34, 56, runID + "_s12_a34_g56"},
		{"r", 1000000, 999999, 7, "r_s1000000_a999999_g7"},
	}
	for _, tt := range tests {
		id := tasks.ID(tt.run, tt.index, tt.attempt, tt.gen)
		if id != tt.want {
			t.Errorf("ID(%q, %d, %d, %d) = %q, want %q", tt.run, tt.index, tt.attempt, tt.gen, id, tt.want)
		}
		if strings.Contains(id, "-") {
			t.Errorf("ID %q contains '-', which asynqmon truncates at", id)
		}
		run, index, attempt, gen, err := tasks.ParseID(id)
		if err != nil || run != tt.run || index != tt.index || attempt != tt.attempt || gen != tt.gen {
			t.Errorf("ParseID(%q) = %q, %d, %d, %d, %v; want %q, %d, %d, %d", id, run, index, attempt, gen, err,
				tt.run, tt.index, tt.attempt, tt.gen)
		}
		// Step.ID agrees with ID.
		s := tasks.Step{RunID: tt.run, Index: tt.index, Attempt: tt.attempt, Gen: tt.gen}
		if s.ID() != id {
			t.Errorf("Step.ID() = %q, want %q", s.ID(), id)
		}
	}
}

func TestIDsDistinct(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for index := range 12 {
		for attempt := 1; attempt <= 12; attempt++ {
			for gen := range 12 {
				id := tasks.ID(runID, index, attempt, gen)
				if seen[id] {
					t.Fatalf("ID(%d, %d, %d) = %q repeats an earlier ID", index, attempt, gen, id)
				}
				seen[id] = true
			}
		}
	}
}

func TestParseIDRejectsMalformed(t *testing.T) {
	t.Parallel()
	for _, id := range []string{
		"",
		runID,
		runID + "_s0",
		"_s0_a1",
		runID + "_s0_a1_g1_x",
		runID + "_0_a1",
		runID + "_a1_s0",
		runID + "_s_a1",
		runID + "_s0_a",
		runID + "_sx_a1",
		runID + "_s0_ax",
		runID + "_s-1_a1",
		runID + "_s0_a-1",
		runID + "_s0_a1_g-1",
		runID + "_s0_a1_h1",
		runID + "_s0_a1_g",
		runID + "_s0_a1_",
		runID + "_s1.5_a1",
		runID + "_s99999999999999999999_a1",
		runID + "__s0_a1",
		runID + "-s0-a1",
		// Non-canonical forms ID never builds.
		runID + "_s+1_a1",
		runID + "_s01_a1",
		runID + "_s1_a1_g0",
	} {
		if run, index, attempt, gen, err := tasks.ParseID(id); err == nil {
			t.Errorf("ParseID(%q) = %q, %d, %d, %d, nil; want an error", id, run, index, attempt, gen)
		} else if !strings.Contains(err.Error(), "malformed task ID") {
			t.Errorf("ParseID(%q) error %q does not say the ID is malformed", id, err)
		}
	}
}

func TestEncodeDecode(t *testing.T) {
	t.Parallel()
	for _, s := range []tasks.Step{
		{RunID: runID, Workflow: "demo", Index: 0, Name: "fetch", Attempt: 1},
		{RunID: runID, Workflow: "billing.v2", Index: 3, Name: "charge_card", Attempt: 7, Gen: 2},
	} {
		b := s.Encode()
		got, err := tasks.Decode(b)
		if err != nil || got != s {
			t.Errorf("Decode(Encode(%+v)) = %+v, %v", s, got, err)
		}
	}
	// The payload format is the contract with tasks already enqueued.
	want := `cairn1 r w 1 s 2 3`
	if got := string(tasks.Step{RunID: "r", Workflow: "w", Index: 1, Name: "s", Attempt: 2, Gen: 3}.Encode()); got != want {
		t.Errorf("Encode = %s, want %s", got, want)
	}
}

func TestDecodeRejectsMalformed(t *testing.T) {
	t.Parallel()
	for _, payload := range []string{
		``,
		`null`,
		`{}`,
		`cairn1`,
		`{"run":"r","wf":"w","idx":0,"step":"s","attempt":1}`,
		`cairn1 r w 0 s 1`,
		`cairn1 r w 0 s 1 0 extra`,
		`cairn2 r w 0 s 1 0`,
		`cairn1  w 0 s 1 0`,
		`cairn1 r  0 s 1 0`,
		`cairn1 r w 0  1 0`,
		`cairn1 r w -1 s 1 0`,
		`cairn1 r w x s 1 0`,
		`cairn1 r w 0 s 0 0`,
		`cairn1 r w 0 s -2 0`,
		`cairn1 r w 0 s 1 -1`,
		`cairn1 r w 0 s 1.5 0`,
		`cairn1 r w 01 s 1 0`,
		`cairn1 r w +1 s 1 0`,
		`cairn1 r w 0 s 1 0 `,
	} {
		if s, err := tasks.Decode([]byte(payload)); !errors.Is(err, tasks.ErrBadPayload) {
			t.Errorf("Decode(%s) = %+v, %v; want ErrBadPayload", payload, s, err)
		}
	}
}

// optionsByType indexes asynq options by type; it fails on a repeated type.
func optionsByType(t *testing.T, opts []asynq.Option) map[asynq.OptionType]asynq.Option {
	t.Helper()
	m := make(map[asynq.OptionType]asynq.Option, len(opts))
	for _, o := range opts {
		if _, dup := m[o.Type()]; dup {
			t.Fatalf("option %s given twice in %v", o, opts)
		}
		m[o.Type()] = o
	}
	return m
}

func TestOptions(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 3, 4, 5, 6, 7, 250e6, time.UTC) // .25s
	id := tasks.ID(runID, 1, 2, 0)
	tests := []struct {
		name        string
		stepTimeout time.Duration
		processAt   time.Time
		timeout     time.Duration
		wantAt      time.Time // zero: no ProcessAt option
	}{
		{"no due time", 10 * time.Second, time.Time{}, 70 * time.Second, time.Time{}},
		{"due now", 10 * time.Second, now, 70 * time.Second, time.Time{}},
		{"due in the past", 10 * time.Second, now.Add(-time.Hour), 70 * time.Second, time.Time{}},
		{"due within this second", time.Minute, now.Add(time.Nanosecond), 2 * time.Minute,
			time.Date(2025, 3, 4, 5, 6, 8, 0, time.UTC)},
		{"due at a fractional second", time.Minute, now.Add(1500 * time.Millisecond), 2 * time.Minute,
			time.Date(2025, 3, 4, 5, 6, 9, 0, time.UTC)},
		{"due at a whole second", time.Minute, time.Date(2025, 3, 4, 5, 7, 0, 0, time.UTC), 2 * time.Minute,
			time.Date(2025, 3, 4, 5, 7, 0, 0, time.UTC)},
		{"no step timeout", 0, now.Add(time.Hour), 24 * time.Hour, now.Add(time.Hour).Truncate(time.Second).Add(time.Second)},
		{"negative step timeout", -time.Second, time.Time{}, 24 * time.Hour, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			opts := tasks.Options("q1", id, tt.stepTimeout, tt.processAt, now)
			m := optionsByType(t, opts)
			if o := m[asynq.QueueOpt]; o == nil || o.Value() != "q1" {
				t.Errorf("queue option %v, want q1", o)
			}
			if o := m[asynq.TaskIDOpt]; o == nil || o.Value() != id {
				t.Errorf("task ID option %v, want %s", o, id)
			}
			if o := m[asynq.MaxRetryOpt]; o == nil || o.Value() != tasks.DefaultMaxDeliveries {
				t.Errorf("max retry option %v, want %d", o, tasks.DefaultMaxDeliveries)
			}
			if o := m[asynq.TimeoutOpt]; o == nil || o.Value() != tt.timeout {
				t.Errorf("timeout option %v, want %v", o, tt.timeout)
			}
			o, ok := m[asynq.ProcessAtOpt]
			switch {
			case tt.wantAt.IsZero() && ok:
				t.Errorf("ProcessAt option %v given for a task due at %v (now %v)", o, tt.processAt, now)
			case !tt.wantAt.IsZero() && !ok:
				t.Errorf("no ProcessAt option for a task due at %v (now %v)", tt.processAt, now)
			case ok:
				at, _ := o.Value().(time.Time)
				if !at.Equal(tt.wantAt) || !at.Equal(tasks.CeilSecond(tt.processAt)) {
					t.Errorf("ProcessAt = %v, want %v", at, tt.wantAt)
				}
				if at.Before(tt.processAt) {
					t.Errorf("ProcessAt %v is before the due time %v", at, tt.processAt)
				}
			}
			want := 4 // queue, task ID, max retry, timeout
			if ok {
				want++
			}
			if len(opts) != want {
				t.Errorf("%d options %v, want %d", len(opts), opts, want)
			}
			// asynq accepts the options.
			task := asynq.NewTask(tasks.TypeStep, nil, opts...)
			if task.Type() != tasks.TypeStep {
				t.Errorf("task type %q", task.Type())
			}
		})
	}
}

func TestCeilSecond(t *testing.T) {
	t.Parallel()
	whole := time.Date(2025, 1, 1, 0, 0, 59, 0, time.UTC)
	tests := []struct {
		in, want time.Time
	}{
		{whole, whole},
		{whole.Add(time.Nanosecond), whole.Add(time.Second)},
		{whole.Add(500 * time.Millisecond), whole.Add(time.Second)},
		{whole.Add(time.Second - time.Nanosecond), whole.Add(time.Second)},
		{whole.Add(-time.Nanosecond), whole},
		{time.Unix(0, 0), time.Unix(0, 0)},
		{time.Unix(1700000000, 1), time.Unix(1700000001, 0)},
		{whole.In(time.FixedZone("half", 5*3600+1800)).Add(time.Millisecond), whole.Add(time.Second)},
	}
	for _, tt := range tests {
		got := tasks.CeilSecond(tt.in)
		if !got.Equal(tt.want) {
			t.Errorf("CeilSecond(%v) = %v, want %v", tt.in, got, tt.want)
		}
		if got.Nanosecond() != 0 || got.Before(tt.in) {
			t.Errorf("CeilSecond(%v) = %v: not a whole second at or after it", tt.in, got)
		}
	}
	// With a monotonic reading, too.
	now := time.Now()
	if got := tasks.CeilSecond(now); got.Nanosecond() != 0 || got.Before(now) || got.Sub(now) >= time.Second {
		t.Errorf("CeilSecond(%v) = %v", now, got)
	}
}

// TestAsynqMessageDue: the due time rides in the message's header
// HeaderDue, 28 bytes more than the message without it, and reads back
// (to the millisecond) from the decoded message; a message without it, or
// with a header that is not a positive number, has no due time.
func TestAsynqMessageDue(t *testing.T) {
	t.Parallel()
	s := tasks.Step{RunID: runID, Workflow: "wf", Index: 1, Name: "b", Attempt: 2}
	due := time.UnixMilli(1_800_000_000_123).Add(456 * time.Microsecond)
	plain, with := s.AsynqMessage("q", time.Minute), s.AsynqMessageDue("q", time.Minute, due)
	if len(with)-len(plain) != 28 {
		t.Errorf("the header adds %d bytes, want 28", len(with)-len(plain))
	}
	m, err := tasks.ParseMessage(with)
	if err != nil {
		t.Fatal(err)
	}
	if got := tasks.DueOf(m.Headers); !got.Equal(due.Truncate(time.Millisecond)) {
		t.Errorf("due %s, want %s", got, due.Truncate(time.Millisecond))
	}
	if string(m.Payload) != string(s.Encode()) || m.ID != s.ID() {
		t.Errorf("message %+v: not the step's", m)
	}
	for _, h := range []map[string]string{nil, {}, {tasks.HeaderDue: ""}, {tasks.HeaderDue: "-5"},
		{tasks.HeaderDue: "0"}, {tasks.HeaderDue: "12x"}, {"other": "1"}} {
		if got := tasks.DueOf(h); !got.IsZero() {
			t.Errorf("DueOf(%v) = %s, want none", h, got)
		}
	}
	// What asynq itself reads of it, written as the scripts write it: the
	// same header.
	rdb := redistest.Shared(t).Client(t)
	queue := "due-" + strings.ReplaceAll(time.Now().Format("150405.000000000"), ".", "")
	if err := rdb.SAdd(context.Background(), tasks.AllQueues, queue).Err(); err != nil {
		t.Fatal(err)
	}
	if err := tasks.NewLuaTaskWriter(rdb).WriteTask(context.Background(), queue, s.ID(), with, time.Now(), time.Now()); err != nil {
		t.Fatal(err)
	}
	info, err := asynq.NewInspectorFromRedisClient(rdb).GetTaskInfo(queue, s.ID())
	if err != nil || info.Headers[tasks.HeaderDue] != "1800000000123" {
		t.Errorf("asynq reads headers %v (%v), want %s 1800000000123", info, err, tasks.HeaderDue)
	}
}
