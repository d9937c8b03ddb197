package tasks

import (
	"strconv"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// Cairn creates the task of a run's next step inside the Lua script that
// checkpoints the step before it (retrystate/lua/complete.lua), so that the
// checkpoint and the task that continues the run are written at once (no
// crash can fall between them) and in one round trip. That script writes the
// record asynq's own enqueue writes, at the pinned asynq version (v0.26),
// with this package's Lua (lua.go: put_task): a hash asynq:{queue}:t:<id>
// holding the protobuf TaskMessage under "msg" (encoded here, or by
// put_now in Lua), and the ID pushed on asynq:{queue}:pending.
// TestDirectEnqueueMatchesAsynq checks both against asynq itself, and the
// worker checks them at start (CheckAsynqWire, probe.go).

// AsynqLeaseDuration is the lease asynq (v0.26, internal/rdb.LeaseDuration)
// gives a worker on a task it dequeues: the task's entry in
// asynq:{queue}:lease scores now + AsynqLeaseDuration, in Unix seconds, and
// the worker's asynq server extends it to now + AsynqLeaseDuration every 5
// seconds while the task runs. TestAsynqLease checks it against asynq.
const AsynqLeaseDuration = 30 * time.Second

// Fields of asynq's TaskMessage protobuf (internal/proto/asynq.proto).
const (
	fieldType    protowire.Number = 1
	fieldPayload protowire.Number = 2
	fieldID      protowire.Number = 3
	fieldQueue   protowire.Number = 4
	fieldRetry   protowire.Number = 5
	fieldTimeout protowire.Number = 8
)

// AsynqMessage encodes the asynq task message that Options would make asynq
// store for this attempt, when it is due now.
func (s Step) AsynqMessage(queue string, stepTimeout time.Duration) []byte {
	m := Message{Type: TypeStep, Payload: s.Encode(), ID: s.ID(), Queue: queue, Retry: DefaultMaxDeliveries,
		Timeout: int64(taskTimeout(stepTimeout) / time.Second)}
	return m.Encode()
}

// HeaderDue is the header of a step task's message that carries the time
// its attempt is due, in Unix milliseconds: the worker that begins it
// counts the wait for a worker from then (the step latencies,
// retrystate/latency.go). A task without it (written by a script, a
// repair, a deferral) counts no wait. Workers of an older version ignore
// it.
const HeaderDue = "cairn-due"

// AsynqMessageDue is AsynqMessage with the attempt's due time in header
// HeaderDue.
func (s Step) AsynqMessageDue(queue string, stepTimeout time.Duration, due time.Time) []byte {
	m := Message{Type: TypeStep, Payload: s.Encode(), ID: s.ID(), Queue: queue, Retry: DefaultMaxDeliveries,
		Timeout: int64(taskTimeout(stepTimeout) / time.Second),
		Headers: map[string]string{HeaderDue: strconv.FormatInt(due.UnixMilli(), 10)}}
	return m.Encode()
}

// DueOf returns the due time header HeaderDue of a step task's message
// carries; zero when it carries none (or one that is not a positive
// number).
func DueOf(headers map[string]string) time.Time {
	v, ok := headers[HeaderDue]
	if !ok {
		return time.Time{}
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// taskTimeout is asynq's timeout of an attempt's task: it outlasts the
// step's own, which the engine enforces.
func taskTimeout(stepTimeout time.Duration) time.Duration {
	if stepTimeout <= 0 {
		return 24 * time.Hour
	}
	return stepTimeout + time.Minute
}
