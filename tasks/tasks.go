package tasks

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"
)

// TypeStep is the asynq task type of every step attempt.
const TypeStep = "cairn:step"

// DefaultMaxDeliveries bounds how often asynq itself re-delivers one attempt's
// task (after a lost lease, a Redis error while saving state, or an early
// arrival). It is not the step's retry budget: Cairn owns that.
const DefaultMaxDeliveries = 25

// Step is the payload of a step-attempt task. The task ID is authoritative;
// the payload repeats what a handler needs before it reads any state, so a
// worker can tell at once whether it has the handler for the step.
type Step struct {
	RunID    string
	Workflow string
	Index    int
	Name     string
	Attempt  int
	Gen      int
}

// ID returns the deterministic task ID of this attempt.
func (s Step) ID() string { return ID(s.RunID, s.Index, s.Attempt, s.Gen) }

// ErrBadPayload is returned by Decode for a payload that is not a step attempt.
var ErrBadPayload = errors.New("tasks: malformed step payload")

// payloadVersion starts every payload.
const payloadVersion = "cairn1"

// Encode returns the task payload: one line of space-separated fields,
// "cairn1 <run> <workflow> <index> <step> <attempt> <gen>", readable in
// asynqmon and decoded without reflection on every delivery. Run IDs and
// workflow and step names contain no spaces.
func (s Step) Encode() []byte {
	b := make([]byte, 0, len(payloadVersion)+len(s.RunID)+len(s.Workflow)+len(s.Name)+16)
	b = append(b, payloadVersion...)
	for _, f := range []string{s.RunID, s.Workflow} {
		b = append(append(b, ' '), f...)
	}
	b = strconv.AppendInt(append(b, ' '), int64(s.Index), 10)
	b = append(append(b, ' '), s.Name...)
	b = strconv.AppendInt(append(b, ' '), int64(s.Attempt), 10)
	b = strconv.AppendInt(append(b, ' '), int64(s.Gen), 10)
	return b
}

// Decode parses a step payload and checks that it names a run, a step and an
// attempt.
func Decode(b []byte) (Step, error) {
	f := strings.Split(string(b), " ")
	bad := func() (Step, error) { return Step{}, fmt.Errorf("%w: %q", ErrBadPayload, b) }
	if len(f) != 7 || f[0] != payloadVersion || f[1] == "" || f[2] == "" || f[4] == "" {
		return bad()
	}
	var n [3]int
	for i, s := range []string{f[3], f[5], f[6]} {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 || strconv.Itoa(v) != s {
			return bad()
		}
		n[i] = v
	}
	if n[1] < 1 {
		return bad()
	}
	return Step{RunID: f[1], Workflow: f[2], Index: n[0], Name: f[4], Attempt: n[1], Gen: n[2]}, nil
}

// ID builds the task ID of one dispatch of one attempt:
// "<run>_s<index>_a<attempt>", with "_g<gen>" appended for a re-dispatch
// (gen > 0) of the same attempt after its task was lost.
func ID(runID string, index, attempt, gen int) string {
	var b strings.Builder
	b.Grow(len(runID) + 16)
	b.WriteString(runID)
	b.WriteString("_s")
	b.WriteString(strconv.Itoa(index))
	b.WriteString("_a")
	b.WriteString(strconv.Itoa(attempt))
	if gen > 0 {
		b.WriteString("_g")
		b.WriteString(strconv.Itoa(gen))
	}
	return b.String()
}

// ParseID is the inverse of ID.
func ParseID(id string) (runID string, index, attempt, gen int, err error) {
	parts := strings.Split(id, "_")
	if len(parts) < 3 || len(parts) > 4 || parts[0] == "" {
		return "", 0, 0, 0, fmt.Errorf("tasks: malformed task ID %q", id)
	}
	num := func(p, prefix string) (int, error) {
		if !strings.HasPrefix(p, prefix) {
			return 0, fmt.Errorf("tasks: malformed task ID %q", id)
		}
		n, err := strconv.Atoi(p[len(prefix):])
		if err != nil || n < 0 {
			return 0, fmt.Errorf("tasks: malformed task ID %q", id)
		}
		return n, nil
	}
	if index, err = num(parts[1], "s"); err != nil {
		return "", 0, 0, 0, err
	}
	if attempt, err = num(parts[2], "a"); err != nil {
		return "", 0, 0, 0, err
	}
	if len(parts) == 4 {
		if gen, err = num(parts[3], "g"); err != nil {
			return "", 0, 0, 0, err
		}
	}
	if ID(parts[0], index, attempt, gen) != id { // only the canonical form
		return "", 0, 0, 0, fmt.Errorf("tasks: malformed task ID %q", id)
	}
	return parts[0], index, attempt, gen, nil
}

// Options returns the asynq options of an attempt's task: its queue, its ID,
// asynq's own delivery budget, a timeout that outlasts the step's own, and,
// for a retry, the time it may first be delivered.
//
// asynq stores ProcessAt in whole seconds and forwards a task once the
// current whole second reaches it, so a task can arrive up to a second before
// the instant asked for. ProcessAt is therefore rounded up to the next whole
// second; the engine still checks the due time when the task arrives.
func Options(queue, id string, stepTimeout time.Duration, processAt time.Time, now time.Time) []asynq.Option {
	opts := []asynq.Option{
		asynq.Queue(queue),
		asynq.TaskID(id),
		asynq.MaxRetry(DefaultMaxDeliveries),
		asynq.Timeout(taskTimeout(stepTimeout)),
	}
	if processAt.After(now) {
		opts = append(opts, asynq.ProcessAt(CeilSecond(processAt)))
	}
	return opts
}

// CeilSecond rounds t up to the next whole second (t itself if it is whole).
func CeilSecond(t time.Time) time.Time {
	if r := t.Truncate(time.Second); !r.Equal(t) {
		return r.Add(time.Second)
	}
	return t
}
