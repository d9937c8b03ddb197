package demo

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/workflow"
)

// ChaosName is the name of the chaos workflow.
const ChaosName = "chaos"

// ChaosInlineName is the name of the chaos workflow's inline twin
// (ChaosInline): the same steps, run inline (workflow.Definition.Inline).
const ChaosInlineName = "chaos-inline"

// ChaosSteps are the chaos workflow's steps, in order.
var ChaosSteps = []string{"s1", "s2", "s3", "s4", "s5"}

// ChaosInput is the chaos workflow's input.
type ChaosInput struct {
	// FailRate is the share of attempts that fail transiently, decided by
	// Injected, so the same attempt fails the same way on every worker.
	FailRate float64 `json:"fail_rate"`
	// SleepMS is how long each step body runs.
	SleepMS int `json:"sleep_ms"`
	// BlockStep names a step whose body, once it has recorded its start,
	// waits until the run's ReleaseKey exists: a test that needs an
	// attempt in flight (to kill its worker, to freeze Redis under it)
	// knows from the audit that it runs, and that it still runs until the
	// test releases it.
	BlockStep string `json:"block_step,omitempty"`
}

// ReleaseKey is the Redis key that releases the blocked bodies of run on
// queue (ChaosInput.BlockStep, SagaInput.BlockComp). The test sets it;
// nothing removes it before the run's data expires.
func ReleaseKey(queue, runID string) string {
	return "cairndemo:{" + queue + "}:release:" + runID
}

// Injected reports whether attempt of step in run fails under rate: a hash
// of the three, so it is the same on every worker and after restarts.
func Injected(runID, step string, attempt int, rate float64) bool {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s|%s|%d", runID, step, attempt)
	// FNV-1a barely moves its high bits when only the last byte changes;
	// the splitmix64 finaliser spreads every input bit over the output.
	x := h.Sum64()
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11)/float64(1<<53) < rate
}

// AuditKey is the Redis list where chaos and ordered step bodies record
// each execution.
func AuditKey(queue string) string { return "cairndemo:{" + queue + "}:audit" }

// AuditEntry is one record of a chaos or ordered step body: it started, or it ended.
type AuditEntry struct {
	Phase   string // "start" or "end"
	RunID   string
	Step    string
	Attempt int
	At      time.Time
	PID     int
}

// ParseAudit parses an audit list entry.
func ParseAudit(s string) (AuditEntry, error) {
	f := strings.Split(s, "|")
	if len(f) != 6 {
		return AuditEntry{}, fmt.Errorf("malformed audit entry %q", s)
	}
	attempt, err1 := strconv.Atoi(f[3])
	ns, err2 := strconv.ParseInt(f[4], 10, 64)
	pid, err3 := strconv.Atoi(f[5])
	if err1 != nil || err2 != nil || err3 != nil {
		return AuditEntry{}, fmt.Errorf("malformed audit entry %q", s)
	}
	return AuditEntry{Phase: f[0], RunID: f[1], Step: f[2], Attempt: attempt, At: time.Unix(0, ns), PID: pid}, nil
}

// auditor returns the function with which step bodies record a phase
// ("start", "end") of their execution in the audit list of queue (AuditKey),
// in the form ParseAudit reads.
func auditor(rdb redis.UniversalClient, queue string) func(ctx context.Context, phase string, sc *workflow.StepContext) {
	key := AuditKey(queue)
	pid := os.Getpid()
	return func(ctx context.Context, phase string, sc *workflow.StepContext) {
		entry := fmt.Sprintf("%s|%s|%s|%d|%d|%d", phase, sc.RunID, sc.Step, sc.Attempt, workflow.SystemClock.Now().UnixNano(), pid)
		// Keep trying while Redis is away (the suite restarts it): the audit
		// must not turn into an injected failure, nor lose a record.
		for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
			err := rdb.RPush(context.WithoutCancel(ctx), key, entry).Err()
			if err == nil {
				return
			}
			time.Sleep(backoff)
		}
	}
}

// Chaos returns the chaos workflow used by the chaos suite: five steps that
// sleep, wait for their release when the input says so, fail transiently as
// Injected says, and record every execution of their body in the audit
// list of queue, so a test can check from outside the engine that no body
// ran twice at once or after its run ended.
func Chaos(rdb redis.UniversalClient, queue string, policy workflow.Policy) workflow.Definition {
	audit := auditor(rdb, queue)
	run := func(ctx context.Context, sc *workflow.StepContext) (any, error) {
		var in ChaosInput
		if err := sc.DecodeInput(&in); err != nil {
			return nil, err
		}
		audit(ctx, "start", sc)
		defer audit(ctx, "end", sc)
		if err := pause(ctx, in.SleepMS); err != nil {
			return nil, err
		}
		if in.BlockStep == sc.Step {
			if err := waitKey(ctx, rdb, ReleaseKey(queue, sc.RunID)); err != nil {
				return nil, err
			}
		}
		if Injected(sc.RunID, sc.Step, sc.Attempt, in.FailRate) {
			return nil, fmt.Errorf("%s: injected transient failure on attempt %d", sc.Step, sc.Attempt)
		}
		return map[string]any{"step": sc.Step, "attempt": sc.Attempt}, nil
	}
	def := workflow.Definition{Name: ChaosName, Policy: policy}
	for _, name := range ChaosSteps {
		def.Steps = append(def.Steps, workflow.Step{Name: name, Run: run})
	}
	return def
}

// ChaosInline is Chaos under the name ChaosInlineName, with inline
// continuation: its steps run one after another in one asynq task when they
// can, so the chaos suite kills workers in the middle of inline chains too.
func ChaosInline(rdb redis.UniversalClient, queue string, policy workflow.Policy) workflow.Definition {
	def := Chaos(rdb, queue, policy)
	def.Name, def.Inline = ChaosInlineName, true
	return def
}

// pause sleeps ms milliseconds (none when ms <= 0), or until ctx is done.
func pause(ctx context.Context, ms int) error {
	if ms <= 0 {
		return nil
	}
	t := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
