package tasks

import (
	"errors"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// asynq's private layout in Redis, at the pinned asynq version (v0.26,
// internal/base/base.go): this file and asynqwire.go are the only Go code of
// Cairn that names asynq's keys or reads its records. Every key of a queue
// carries the queue's name as its Redis Cluster hash tag, as Cairn's own
// keys do (retrystate), so a script may touch both.

// AllQueues is asynq's set of the names of the queues it knows (of every
// queue: outside any queue's slot). asynq's enqueue adds the queue to it,
// and its Inspector (asynqmon) knows only the queues there.
const AllQueues = "asynq:queues"

// AllServers is asynq's sorted set of its servers' record keys (of every
// queue), by the expiry of each record in Unix seconds (internal/base
// AllServers); asynq's Inspector.Servers reads the records.
const AllServers = "asynq:servers"

// CancelChannel is asynq's pub/sub channel on which Inspector.CancelProcessing
// publishes the ID of a task whose running handler must be cancelled (of
// every queue).
const CancelChannel = "asynq:cancel"

// Keys names asynq's keys of one queue, and the one key of Cairn's that
// indexes asynq's tasks (Timers).
type Keys struct{ prefix, queue string }

// QueueKeys returns asynq's keys of queue.
func QueueKeys(queue string) Keys { return Keys{prefix: "asynq:{" + queue + "}:", queue: queue} }

// Pending is the list of the queue's pending task IDs: asynq pushes on the
// left and takes from the right, so the oldest is last.
func (k Keys) Pending() string { return k.prefix + "pending" }

// Scheduled is the sorted set of the queue's scheduled task IDs, by due
// time in Unix seconds.
func (k Keys) Scheduled() string { return k.prefix + "scheduled" }

// Timers is Cairn's sorted set of the queue's scheduled task IDs by due
// time in Unix milliseconds (asynq's Scheduled keeps whole seconds): the
// scripts that schedule a task add it (put_task, put_now, AddTimer), and
// PromoteDue moves the task to Pending when its millisecond comes
// (timers.go). It is Cairn's key, in the queue's slot, named here because
// only this package reads it.
func (k Keys) Timers() string { return "cairn:{" + k.queue + "}:timers" }

// Lease is the sorted set of the queue's active task IDs, by the expiry of
// the lease of the worker that dequeued them, in Unix seconds (see
// AsynqLeaseDuration). A lease nobody extends belongs to a delivery no
// worker received.
func (k Keys) Lease() string { return k.prefix + "lease" }

// Task is the hash of task id: its TaskMessage under "msg" (AsynqMessage),
// its state and, once scheduled, the time it is due. Task("") names a key
// of the queue's slot that is never written (a placeholder a script may
// declare).
func (k Keys) Task(id string) string { return k.prefix + "t:" + id }

// MessageField is the field of a task's hash (Keys.Task) that holds its
// TaskMessage.
const MessageField = "msg"

// ErrBadMessage is returned by DecodeMessage for bytes that are not an
// asynq TaskMessage.
var ErrBadMessage = errors.New("tasks: malformed asynq task message")

// DecodeMessage reads the type and the payload of an asynq TaskMessage (the
// protobuf AsynqMessage encodes; other fields are skipped).
func DecodeMessage(b []byte) (typ string, payload []byte, err error) {
	for len(b) > 0 {
		num, wt, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "", nil, errors.Join(ErrBadMessage, protowire.ParseError(n))
		}
		b = b[n:]
		switch {
		case num == fieldType && wt == protowire.BytesType:
			v, m := protowire.ConsumeBytes(b)
			typ, n = string(v), m
		case num == fieldPayload && wt == protowire.BytesType:
			v, m := protowire.ConsumeBytes(b)
			payload, n = v, m
		default:
			n = protowire.ConsumeFieldValue(num, wt, b)
		}
		if n < 0 {
			return "", nil, errors.Join(ErrBadMessage, protowire.ParseError(n))
		}
		b = b[n:]
	}
	if typ == "" {
		return "", nil, errors.Join(ErrBadMessage, errors.New("no task type"))
	}
	return typ, payload, nil
}

// Processed is asynq's counter of the tasks the queue's servers processed
// (its daily counters are apart).
func (k Keys) Processed() string { return k.prefix + "processed" }

// Active is the list of the IDs of the queue's tasks a worker dequeued
// (their leases are in Lease).
func (k Keys) Active() string { return k.prefix + "active" }

// Retry is the sorted set of the queue's tasks waiting for a retry, by due
// time in Unix seconds.
func (k Keys) Retry() string { return k.prefix + "retry" }

// Archived is the sorted set of the queue's archived tasks, by the time
// they were archived (Unix seconds).
func (k Keys) Archived() string { return k.prefix + "archived" }

// Completed is the sorted set of the queue's completed tasks kept for
// their retention, by the time they expire (Unix seconds).
func (k Keys) Completed() string { return k.prefix + "completed" }

// Paused exists while asynq's Inspector has the queue paused.
func (k Keys) Paused() string { return k.prefix + "paused" }

// Failed is asynq's counter of the queue's failed tasks (its daily
// counters are apart).
func (k Keys) Failed() string { return k.prefix + "failed" }

// ProcessedOn is asynq's counter of the tasks the queue's servers
// processed on the day of t (UTC).
func (k Keys) ProcessedOn(t time.Time) string {
	return k.prefix + "processed:" + t.UTC().Format("2006-01-02")
}

// FailedOn is asynq's counter of the queue's tasks that failed on the day
// of t (UTC).
func (k Keys) FailedOn(t time.Time) string {
	return k.prefix + "failed:" + t.UTC().Format("2006-01-02")
}

// Fetchers is Cairn's sorted set of the workers that fetch from the queue
// with Cairn's own dequeue (Dequeuer), by the expiry of their heartbeat in
// Unix ms.
func (k Keys) Fetchers() string { return "cairn:{" + k.queue + "}:fetchers" }

// Claim is the list of the task IDs worker took from Pending and has not
// taken into Active yet (Dequeuer.Claim, Dequeuer.Take).
func (k Keys) Claim(worker string) string { return "cairn:{" + k.queue + "}:claim:" + worker }

// WorkerRecord is Cairn's hash describing worker (its host, pid, queues,
// concurrency, tasks in flight, start, version and last heartbeat), which
// the worker's heartbeat (Dequeuer.Housekeep) rewrites with the heartbeat's
// TTL and its clean exit (Dequeuer.Leave) deletes: a worker killed leaves a
// record that expires on its own.
func (k Keys) WorkerRecord(worker string) string { return "cairn:{" + k.queue + "}:worker:" + worker }
