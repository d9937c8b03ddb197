package retrystate

import (
	"strconv"

	"github.com/cairnhq/cairn/tasks"
)

// keys builds every Redis key of one queue's workflow state. It is the only
// place a Cairn key name is spelled out.
//
// Scripts declare the run's key and derive the journal, index and
// notification keys from the queue's prefix (passed as PREFIX; see
// lua/README.md), as asynq derives task keys; every derived key carries the
// same hash tag and so lives in the slot of the declared keys.
type keys struct {
	queue  string
	prefix string // "cairn:{queue}:"
}

func newKeys(queue string) keys {
	return keys{queue: queue, prefix: "cairn:{" + queue + "}:"}
}

// format is a string: the version of the layout of the queue's data
// (format.go). It is the one key whose meaning never changes.
func (k keys) format() string { return k.prefix + "format" }

// Definitions is a hash: workflow name -> definition JSON, as registered by
// the workers.
func (k keys) definitions() string { return k.prefix + "defs" }

// definitionVersions is a hash: workflow name -> the version published with
// its definition, the sha256 that names its template (definition).
func (k keys) definitionVersions() string { return k.prefix + "defv" }

// definition is the template of a definition version: a hash of the fixed
// fields every run of that version starts with (its steps' names, policies
// and limits), named as in the run hash (definitions.go). It is named by
// the sha256 of its contents and never changes; runs refer to it (their
// field def), and a finished run drops those fields again (lua/lib/compact_run.lua).
//
// Its seed (seed) is what create.lua copies into a new run of that version.
func (k keys) definition(sha string) string { return k.prefix + "def:" + sha }

// seed is what create.lua copies (COPY) into a new run of definition
// version sha: the template's fields, def, and every field create.lua gives
// a run and its steps with its default. Those defaults are create.lua's, so
// the name carries the create script's version (script, its SHA1: the
// first 12 hex digits): a create.lua whose defaults changed uses seeds of
// its own, and processes of two versions side by side each copy theirs.
// create.lua makes a seed from the template when it is missing (the
// version's first run under that script), so it is derived data: deleting
// it costs the next create the making of it again. Like the template, it
// never changes and is never deleted (one per definition version and
// create.lua version).
func (k keys) seed(sha, script string) string {
	return k.prefix + "def:" + sha + ":seed:" + script[:12]
}

// Run is the run record hash. Its steps' records are fields of the same
// hash, named s<idx>.<field> (lua/README.md).
func (k keys) run(id string) string { return k.prefix + "run:" + id }

// Journal is the run's journal stream.
func (k keys) journal(id string) string { return k.prefix + "run:" + id + ":j" }

// journalTemp is where journal.lua restores, for the time of one script,
// the journal entries compact_run moved into the run hash.
func (k keys) journalTemp(id string) string { return k.prefix + "run:" + id + ":jtmp" }

// Mailbox is the run's mailbox: a stream of the signals it received that
// no await has consumed yet (lua/signal.lua). It expires with the run. The
// IDs of the signals a run received are fields sig:<id> of the run hash.
func (k keys) mailbox(id string) string { return k.prefix + "run:" + id + ":mbox" }

// Idempotency maps an owner's idempotency key to the run it started. Keys
// are scoped by owner: two owners' equal keys are different keys (one user
// cannot learn of, or collide with, another's runs through a key). A key
// started without an owner keeps the name it had before keys were scoped.
// The length of the owner makes the name unambiguous whatever the owner and
// the key hold.
func (k keys) idempotency(owner, key string) string {
	if owner == "" {
		return k.legacyIdempotency(key)
	}
	return k.prefix + "idemo:" + strconv.Itoa(len(owner)) + ":" + owner + ":" + key
}

// legacyIdempotency is an idempotency key's name before keys were scoped by
// owner.
func (k keys) legacyIdempotency(key string) string { return k.prefix + "idem:" + key }

// idempotencyNone is the declared placeholder for scripts called without an
// idempotency key: a key in the queue's slot that is never written.
func (k keys) idempotencyNone() string { return k.prefix + "idem:" }

// All indexes every run by creation time.
func (k keys) all() string { return k.prefix + "idx:all" }

// Active indexes non-terminal runs by last update.
func (k keys) active() string { return k.prefix + "idx:active" }

// Scheduled indexes runs with a scheduled retry by next_attempt_at.
func (k keys) scheduled() string { return k.prefix + "idx:scheduled" }

// Fences indexes runs whose current step is running, by the expiry of the
// attempt's fence: the reconciler finds dead workers' attempts here.
func (k keys) fences() string { return k.prefix + "idx:fences" }

// Deadlines indexes non-terminal runs that have a deadline, by deadline.
func (k keys) deadlines() string { return k.prefix + "idx:deadlines" }

// Waiting indexes the runs that wait for reason (see WaitReason) by the
// time they began to wait.
func (k keys) waiting(reason WaitReason) string { return k.prefix + "idx:waiting:" + string(reason) }

// ReconcileLock is held by the replica running a reconciliation pass.
func (k keys) reconcileLock() string { return k.prefix + "lock:reconcile" }

// SweepLock is held by the replica sweeping dead fences.
func (k keys) sweepLock() string { return k.prefix + "lock:sweep" }

// Attention indexes runs that need an operator, by when they started to.
func (k keys) attention() string { return k.prefix + "idx:attention" }

// ByStatus indexes runs of one status by creation time.
func (k keys) byStatus(status RunStatus) string { return k.prefix + "idx:status:" + string(status) }

// Notifications is the queue's stream of run-level events (run failed,
// succeeded, cancelled) for live subscribers and notifiers.
func (k keys) notifications() string { return k.prefix + "notifications" }

// asynq's keys of the queue, which the scripts declare as they write asynq's
// task records: named by package tasks, the one owner of asynq's layout.

// asynqTask is asynq's hash of task id (tasks.Keys.Task); with no ID, a key
// of the slot that is never written.
func (k keys) asynqTask(id string) string { return tasks.QueueKeys(k.queue).Task(id) }

// asynqQueues is asynq's set of every queue's name (tasks.AllQueues, not in
// the queue's slot).
func (k keys) asynqQueues() string { return tasks.AllQueues }

// asynqPending is asynq's list of the queue's pending task IDs.
func (k keys) asynqPending() string { return tasks.QueueKeys(k.queue).Pending() }

// asynqScheduled is asynq's sorted set of the queue's scheduled task IDs,
// by due time in Unix seconds.
func (k keys) asynqScheduled() string { return tasks.QueueKeys(k.queue).Scheduled() }

// asynqLease is asynq's sorted set of the queue's active task IDs, by the
// expiry of the lease of the worker that dequeued them (tasks.Keys.Lease).
func (k keys) asynqLease() string { return tasks.QueueKeys(k.queue).Lease() }

// gateWait is the line of runs waiting at gate g ("k:<ordering key>" or
// "w:<workflow>"), by start sequence; gateAdmitted the runs it admitted, by
// admission time (lua/lib/gates.lua). The key or workflow may hold any
// bytes: the suffix tells the two sets apart.
func (k keys) gateWait(g string) string     { return k.prefix + "gate:" + g + ":wait" }
func (k keys) gateAdmitted(g string) string { return k.prefix + "gate:" + g + ":admitted" }

// breaker is the hash of a circuit breaker (lua/lib/breaker.lua);
// breakers indexes them by last change.
func (k keys) breaker(name string) string { return k.prefix + "breaker:" + name }
func (k keys) breakers() string           { return k.prefix + "idx:breakers" }

// gates indexes the gates in use (with waiting or admitted runs).
func (k keys) gates() string { return k.prefix + "idx:gates" }

// Audit is the queue's stream of administrators' actions (restores, actions
// on other subjects' runs).
func (k keys) audit() string { return k.prefix + "audit" }

// latency is a hash of the step latencies the workers observed in one hour
// (hour: Unix seconds / 3600): field <kind>|<workflow>|<step>|<bucket> ->
// count (latency.go). It expires LatencyRetention after its last write.
func (k keys) latency(hour int64) string { return k.prefix + "lat:" + strconv.FormatInt(hour, 10) }
