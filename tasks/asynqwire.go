package tasks

import (
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
	payload := s.Encode()
	id := s.ID()
	b := make([]byte, 0, 32+len(payload)+len(id)+len(queue))
	b = protowire.AppendTag(b, fieldType, protowire.BytesType)
	b = protowire.AppendString(b, TypeStep)
	b = protowire.AppendTag(b, fieldPayload, protowire.BytesType)
	b = protowire.AppendBytes(b, payload)
	b = protowire.AppendTag(b, fieldID, protowire.BytesType)
	b = protowire.AppendString(b, id)
	b = protowire.AppendTag(b, fieldQueue, protowire.BytesType)
	b = protowire.AppendString(b, queue)
	b = protowire.AppendTag(b, fieldRetry, protowire.VarintType)
	b = protowire.AppendVarint(b, DefaultMaxDeliveries)
	b = protowire.AppendTag(b, fieldTimeout, protowire.VarintType)
	// An int64 field's varint is the value's two's-complement bits, as
	// proto.Marshal writes it (and the timeout is at least a minute).
	b = protowire.AppendVarint(b, uint64(taskTimeout(stepTimeout)/time.Second)) //nolint:gosec // see above
	return b
}

// taskTimeout is asynq's timeout of an attempt's task: it outlasts the
// step's own, which the engine enforces.
func taskTimeout(stepTimeout time.Duration) time.Duration {
	if stepTimeout <= 0 {
		return 24 * time.Hour
	}
	return stepTimeout + time.Minute
}
