package tasks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// AsynqFormatVersion is the asynq release whose internal task record
// Cairn's Lua scripts write (see asynqwire.go and lua.go). go.mod pins asynq to it: an
// upgrade is a data-format change until CheckAsynqWire and the tests pass on
// the new release.
const AsynqFormatVersion = "v0.26.0"

// ProbeQueuePrefix starts the name of CheckAsynqWire's scratch queue, which
// is unique to each check: "cairn-probe-" and 16 hex digits.
const ProbeQueuePrefix = "cairn-probe-"

// asynqTaskMessage is the full name of asynq's task message type, which
// asynq registers with the protobuf registry.
const asynqTaskMessage = "asynq.TaskMessage"

// pendingSinceSlack bounds how far apart the pending_since times of the two
// writes of one probe may be: both are the time of the write, in Unix
// nanoseconds, so any other unit or meaning is far outside it.
const pendingSinceSlack = time.Minute

// TaskWriter writes asynq's record of a task as Cairn's state scripts do
// (LuaTaskWriter): pending when due is zero or not after now, else
// scheduled for due.
type TaskWriter interface {
	// WriteTask writes task id with the message msg, which Go encoded
	// (Step.AsynqMessage), as put_task does.
	WriteTask(ctx context.Context, queue, id string, msg []byte, due, now time.Time) error
	// WriteStepTask writes the task of attempt s, encoding its message in
	// Lua, as put_now does.
	WriteStepTask(ctx context.Context, queue string, s Step, stepTimeout time.Duration, due, now time.Time) error
}

// WireMismatchError is CheckAsynqWire's finding that Cairn's writer and
// asynq's own client write different task records.
type WireMismatchError struct {
	// AsynqVersion is the version of the asynq module linked into this
	// program.
	AsynqVersion string
	// Diffs names each difference: the probe case, then the field.
	Diffs []string
}

func (e *WireMismatchError) Error() string {
	return fmt.Sprintf("asynq %s does not store tasks as Cairn writes them (Cairn writes asynq %s's task record "+
		"from its Lua scripts: tasks/lua/put_task.lua and put_now.lua): %s",
		e.AsynqVersion, AsynqFormatVersion, strings.Join(e.Diffs, "; "))
}

// LinkedAsynqVersion is the version of the asynq module linked into this
// program: from the build information, else (a test binary has none) from
// the module cache path the asynq package was compiled from, else
// "(unknown)".
func LinkedAsynqVersion() string {
	const mod = "github.com/hibiken/asynq"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path != mod {
				continue
			}
			if d.Replace != nil {
				return d.Replace.Version + " (replacing " + d.Version + ")"
			}
			return d.Version
		}
	}
	if f := runtime.FuncForPC(reflect.ValueOf(asynq.NewTask).Pointer()); f != nil {
		file, _ := f.FileLine(f.Entry())
		if _, after, ok := strings.Cut(file, mod+"@"); ok {
			if v, _, ok := strings.Cut(after, "/"); ok {
				return v
			}
		}
	}
	return "(unknown)"
}

// probeCase is one task the probe writes both ways.
type probeCase struct {
	name    string
	step    Step
	timeout time.Duration // the step's timeout
	delay   time.Duration // due this long after now; 0: due now
}

var probeCases = []probeCase{
	{"pending task", Step{RunID: "probe", Workflow: "cairn-probe", Index: 1, Name: "next", Attempt: 1}, 0, 0},
	{"pending re-dispatch", Step{RunID: "probe", Workflow: "cairn-probe", Index: 0, Name: "first", Attempt: 3, Gen: 2},
		90 * time.Second, 0},
	// Not a whole second after now: asynq keeps whole seconds.
	{"scheduled retry", Step{RunID: "probe", Workflow: "cairn-probe", Index: 2, Name: "retry", Attempt: 2},
		90 * time.Second, time.Hour + 1500*time.Millisecond},
}

// taskRecord is everything asynq keeps of one task in one queue.
type taskRecord struct {
	hash      map[string]string
	pending   []string
	scheduled []redis.Z
}

// CheckAsynqWire checks that write (Cairn's writer of the tasks that
// continue a run: LuaTaskWriter runs the Lua that the state scripts write
// them with) and asynq's own client store the same record of a task. For
// each case (a pending task, a pending re-dispatch, a scheduled retry) it
// enqueues a step attempt's task with asynq's client, as the engine does
// (Options), reads asynq's record (the task hash, the queue's pending list
// and scheduled set) and deletes it; then it writes the same task with
// write's WriteTask (put_task: the message encoded in Go), reads that
// record and deletes it, and again with WriteStepTask (put_now: the
// message encoded in Lua). Each record must be asynq's: every hash field
// (the "msg" field decoded with asynq's own protobuf type, compared field
// by field; pending_since, the time of the write, within a minute) and the
// lists' contents. A difference of the second write is named "<case>,
// message encoded in Lua". The check runs in a scratch queue of its own (ProbeQueuePrefix)
// and deletes every key it wrote, also when it fails. now is the clock the
// engine enqueues by.
//
// A difference is a *WireMismatchError, naming each differing field and
// the linked asynq version; any other error is Redis's.
func CheckAsynqWire(ctx context.Context, rdb redis.UniversalClient, write TaskWriter, now func() time.Time) (err error) {
	var suffix [8]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return err
	}
	queue := ProbeQueuePrefix + hex.EncodeToString(suffix[:])
	defer func() {
		// Cleaned up even when ctx ended: the keys must not stay.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if cerr := deleteProbeKeys(cctx, rdb, queue); cerr != nil && err == nil {
			err = fmt.Errorf("delete the asynq probe's keys of queue %s: %w", queue, cerr)
		}
	}()
	var diffs []string
	for _, c := range probeCases {
		d, err := probeOne(ctx, rdb, write, now, queue, c)
		if err != nil {
			return fmt.Errorf("asynq probe, %s: %w", c.name, err)
		}
		diffs = append(diffs, d...)
	}
	if len(diffs) > 0 {
		return &WireMismatchError{AsynqVersion: LinkedAsynqVersion(), Diffs: diffs}
	}
	return nil
}

func probeOne(ctx context.Context, rdb redis.UniversalClient, write TaskWriter, now func() time.Time,
	queue string, c probeCase) ([]string, error) {
	id := c.step.ID()
	// Cairn's times are whole milliseconds (the scripts get now in ms): a
	// due time with a sub-millisecond part would round up to the next
	// second in asynq's ProcessAt and not in the scripts, when its
	// milliseconds are whole seconds (1 in 1,000 starts refused the worker).
	t0 := now().Truncate(time.Millisecond)
	var due time.Time
	if c.delay > 0 {
		due = t0.Add(c.delay)
	}
	client := asynq.NewClientFromRedisClient(rdb) // shares rdb: not to be closed
	if _, err := client.EnqueueContext(ctx, asynq.NewTask(TypeStep, c.step.Encode()),
		Options(queue, id, c.timeout, due, t0)...); err != nil {
		return nil, fmt.Errorf("asynq's enqueue: %w", err)
	}
	theirs, err := readRecord(ctx, rdb, queue, id)
	if err != nil {
		return nil, err
	}
	if err := deleteTaskKeys(ctx, rdb, queue, id); err != nil {
		return nil, err
	}
	var diffs []string
	for _, w := range []struct {
		name  string
		write func() error
	}{
		{c.name, func() error {
			return write.WriteTask(ctx, queue, id, c.step.AsynqMessage(queue, c.timeout), due, now())
		}},
		{c.name + ", message encoded in Lua", func() error {
			return write.WriteStepTask(ctx, queue, c.step, c.timeout, due, now())
		}},
	} {
		if err := w.write(); err != nil {
			return nil, fmt.Errorf("write with Cairn's writer (%s): %w", w.name, err)
		}
		ours, err := readRecord(ctx, rdb, queue, id)
		if err != nil {
			return nil, err
		}
		if err := deleteTaskKeys(ctx, rdb, queue, id); err != nil {
			return nil, err
		}
		for _, d := range compareRecords(theirs, ours) {
			diffs = append(diffs, w.name+": "+d)
		}
	}
	return diffs, nil
}

// asynqKeys are the keys of asynq v0.26 (internal/base) that an enqueue of
// task id on queue writes, besides its SADD of the queue to AllQueues.
func asynqKeys(queue, id string) (task, pending, scheduled string) {
	k := QueueKeys(queue)
	return k.Task(id), k.Pending(), k.Scheduled()
}

func readRecord(ctx context.Context, rdb redis.UniversalClient, queue, id string) (taskRecord, error) {
	task, pending, scheduled := asynqKeys(queue, id)
	var r taskRecord
	var err error
	if r.hash, err = rdb.HGetAll(ctx, task).Result(); err != nil {
		return r, err
	}
	if r.pending, err = rdb.LRange(ctx, pending, 0, -1).Result(); err != nil {
		return r, err
	}
	r.scheduled, err = rdb.ZRangeWithScores(ctx, scheduled, 0, -1).Result()
	return r, err
}

func deleteTaskKeys(ctx context.Context, rdb redis.UniversalClient, queue, id string) error {
	task, pending, scheduled := asynqKeys(queue, id)
	// (And Cairn's index of the scheduled task's millisecond, timers.go.)
	return rdb.Del(ctx, task, pending, scheduled, QueueKeys(queue).Timers()).Err()
}

// deleteProbeKeys deletes every key the probe's cases may have written and
// the scratch queue's entry in asynq:queues.
func deleteProbeKeys(ctx context.Context, rdb redis.UniversalClient, queue string) error {
	var errs []error
	for _, c := range probeCases {
		errs = append(errs, deleteTaskKeys(ctx, rdb, queue, c.step.ID()))
	}
	errs = append(errs, rdb.SRem(ctx, AllQueues, queue).Err())
	return errors.Join(errs...)
}

// compareRecords lists the differences between asynq's record (theirs) and
// Cairn's (ours).
func compareRecords(theirs, ours taskRecord) []string {
	var diffs []string
	if len(theirs.hash) == 0 {
		diffs = append(diffs, "asynq's enqueue wrote no task hash where Cairn writes it (asynq:{queue}:t:<id>)")
	}
	fields := make([]string, 0, len(theirs.hash)+len(ours.hash))
	for f := range theirs.hash {
		fields = append(fields, f)
	}
	for f := range ours.hash {
		if _, ok := theirs.hash[f]; !ok {
			fields = append(fields, f)
		}
	}
	slices.Sort(fields)
	for _, f := range fields {
		a, aok := theirs.hash[f]
		b, bok := ours.hash[f]
		switch {
		case !aok || !bok:
			diffs = append(diffs, fmt.Sprintf("hash field %s: asynq %s, Cairn %s", f, present(a, aok), present(b, bok)))
		case f == "msg":
			diffs = append(diffs, compareMessages(a, b)...)
		case f == "pending_since":
			if !closeNanos(a, b) {
				diffs = append(diffs, fmt.Sprintf("hash field pending_since: asynq %q, Cairn %q (not the same "+
					"time in Unix nanoseconds)", a, b))
			}
		case a != b:
			diffs = append(diffs, fmt.Sprintf("hash field %s: asynq %q, Cairn %q", f, a, b))
		}
	}
	if !slices.Equal(theirs.pending, ours.pending) {
		diffs = append(diffs, fmt.Sprintf("pending list (asynq:{queue}:pending): asynq %q, Cairn %q",
			theirs.pending, ours.pending))
	}
	if !slices.Equal(theirs.scheduled, ours.scheduled) {
		diffs = append(diffs, fmt.Sprintf("scheduled set (asynq:{queue}:scheduled): asynq %v, Cairn %v",
			theirs.scheduled, ours.scheduled))
	}
	return diffs
}

func present(v string, ok bool) string {
	if !ok {
		return "(absent)"
	}
	return strconv.Quote(v)
}

func closeNanos(a, b string) bool {
	x, err1 := strconv.ParseInt(a, 10, 64)
	y, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil {
		return false
	}
	return time.Duration(max(x-y, y-x)) <= pendingSinceSlack
}

// compareMessages decodes two task messages with asynq's own protobuf type
// and names the fields in which they differ.
func compareMessages(theirs, ours string) []string {
	mt, err := protoregistry.GlobalTypes.FindMessageByName(asynqTaskMessage)
	if err != nil {
		return []string{fmt.Sprintf("asynq's message type %s is not registered: %v", asynqTaskMessage, err)}
	}
	a, b := mt.New(), mt.New()
	if err := proto.Unmarshal([]byte(theirs), a.Interface()); err != nil {
		return []string{fmt.Sprintf("msg: asynq's does not decode as %s: %v", asynqTaskMessage, err)}
	}
	if err := proto.Unmarshal([]byte(ours), b.Interface()); err != nil {
		return []string{fmt.Sprintf("msg: Cairn's does not decode as %s: %v", asynqTaskMessage, err)}
	}
	var diffs []string
	fds := a.Descriptor().Fields()
	for i := range fds.Len() {
		fd := fds.Get(i)
		if a.Has(fd) == b.Has(fd) && a.Get(fd).Equal(b.Get(fd)) {
			continue
		}
		diffs = append(diffs, fmt.Sprintf("msg.%s: asynq %s, Cairn %s", fd.Name(), fieldValue(a, fd), fieldValue(b, fd)))
	}
	if ua, ub := a.GetUnknown(), b.GetUnknown(); string(ua) != string(ub) {
		diffs = append(diffs, fmt.Sprintf("msg: fields unknown to asynq's %s: asynq %x, Cairn %x",
			asynqTaskMessage, []byte(ua), []byte(ub)))
	}
	return diffs
}

func fieldValue(m protoreflect.Message, fd protoreflect.FieldDescriptor) string {
	if !m.Has(fd) {
		return "(unset)"
	}
	v := m.Get(fd)
	switch {
	case fd.IsMap():
		var kv []string
		v.Map().Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
			kv = append(kv, fmt.Sprintf("%v=%v", k.Interface(), v.Interface()))
			return true
		})
		slices.Sort(kv)
		return "{" + strings.Join(kv, " ") + "}"
	case fd.Kind() == protoreflect.BytesKind:
		return strconv.Quote(string(v.Bytes()))
	case fd.Kind() == protoreflect.StringKind:
		return strconv.Quote(v.String())
	default:
		return fmt.Sprint(v.Interface())
	}
}
