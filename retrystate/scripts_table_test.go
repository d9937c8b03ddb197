package retrystate

// Table tests of the Lua scripts, one table per script. Each case seeds a
// state in a private redis-server (one per table, flushed before every
// case), runs the script with the case's KEYS and ARGV as the Store runs it
// (redis.Script.Run: EVALSHA, then EVAL), and compares the whole reply and
// the whole database: what the script changed is rendered as a diff against
// the seed (every hash field, sorted-set member and score, string, list
// element, stream entry with its fields, and key expiry), and compared with
// testdata/scripts/<table>.golden. Stream entry IDs are left out (they carry
// the server's clock); everything else is fixed by the case: the time (tNow)
// comes from ARGV, as it does from the Store.
//
// After a deliberate change to a script, review the new behaviour with
//
//	go test ./retrystate/ -run TestScript -update-script-tables
//
// and the diff of testdata/scripts.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/tasks"
)

var updateScriptTables = flag.Bool("update-script-tables", false,
	"rewrite retrystate/testdata/scripts/*.golden with the scripts' current writes")

// The fixed parameters of every case.
const (
	tQueue   = "q"
	tRun     = "R1"
	tNow     = int64(1_800_000_000_000) // NOWS of every run-level script
	tCreated = tNow - 600_000           // the seeded run's creation
	tStarted = tCreated + 1_000         // its first attempt
	tAttempt = tNow - 5_000             // the start of the current attempt
	tFence   = tNow + 5_000             // a live fence's expiry
	tKeep    = int64(3_600_000)         // retention, ms
)

var (
	tk      = newKeys(tQueue)
	runKey  = tk.run(tRun)
	jKey    = tk.journal(tRun)
	taskKey = tk.asynqTask
)

// world is a seed: Redis commands that build the state a case starts from.
type world struct {
	n        int  // steps of the seeded run
	finished bool // the run's keys expire
	cmds     [][]any
}

// nothing is an empty database.
func nothing() *world { return &world{} }

func (w *world) do(args ...any) *world {
	w.cmds = append(w.cmds, args)
	return w
}

// set writes fields of the run hash.
func (w *world) set(kv ...any) *world { return w.do(append([]any{"HSET", runKey}, kv...)...) }

// step writes fields of step i.
func (w *world) step(i int, kv ...any) *world {
	args := []any{"HSET", runKey}
	for j := 0; j < len(kv); j += 2 {
		args = append(args, fmt.Sprintf("s%d.%v", i, kv[j]), kv[j+1])
	}
	return w.do(args...)
}

func (w *world) zadd(key string, score int64, member string) *world {
	return w.do("ZADD", key, score, member)
}

//nolint:unparam // as ZREM: the member is named where the state is built
func (w *world) zrem(key, member string) *world { return w.do("ZREM", key, member) }

// move moves the run from one status index to another.
func (w *world) move(from, to RunStatus) *world {
	return w.zrem(tk.byStatus(from), tRun).zadd(tk.byStatus(to), tCreated, tRun)
}

// expiring gives the run and its journal the retention of a finished run.
func (w *world) expiring() *world {
	w.finished = true
	return w.do("PEXPIRE", runKey, tKeep).do("PEXPIRE", jKey, tKeep)
}

// idem gives the run the idempotency key "k", owned by o (expiring with a
// finished run).
func (w *world) idem() *world {
	name := tk.idempotency("o", "k")
	w.set("idempotency_key", "k", "idem_key", strings.TrimPrefix(name, tk.prefix)).do("SET", name, tRun)
	if w.finished {
		w.do("PEXPIRE", name, tKeep)
	}
	return w
}

func taskID(idx, attempt int) string { return fmt.Sprintf("%s_s%d_a%d", tRun, idx, attempt) }

// fresh is a run of the named steps as create.lua leaves it, created at
// tCreated (TestSeedIsWhatCreateWrites holds the two together): pending,
// step 0 current and due, no run timeout or iteration ceiling. Step i has
// max_attempts 3, max_crashes 1, timeout 60s.
func fresh(names ...string) *world {
	w := &world{n: len(names)}
	w.template(tDef, names...)
	w.set("workflow", "wf", "status", "pending", "owner", "o", "input", `{"n":1}`,
		"idempotency_key", "", "idem_key", "", "def", tDef, "steps", len(names),
		"iterations", "0", "max_iterations", "0", "deadline", "0", "deadline_base", tCreated, "run_timeout_ms", "0",
		"created_at", tCreated, "started_at", "0", "finished_at", "0",
		"failure_code", "", "failure_reason", "", "warning", "", "needs_attention", "0",
		"auto_recoveries", "0", "current", "0", "updated_at", tCreated)
	for i, name := range names {
		w.step(i, "name", name, "optional", "0", "max_attempts", "3", "max_crashes", "1",
			"timeout_ms", "60000", "policy", `{"p":"`+name+`"}`, "run_timeout_ms", "0", "max_iterations", "0",
			"status", "pending", "attempt", "0", "budget_base", "0", "retry_attempts", "0", "retry_state", "none",
			"next_attempt_at", "0", "attempts_started", "0", "crashes", "0", "gen", "0", "task", "", "fence", "",
			"fence_expires_at", "0", "last_error", "", "last_error_class", "", "output", "", "started_at", "0",
			"finished_at", "0")
	}
	w.step(0, "attempt", "1", "task", taskID(0, 1))
	w.zadd(tk.all(), tCreated, tRun).zadd(tk.byStatus("pending"), tCreated, tRun).zadd(tk.active(), tCreated, tRun)
	return w.do("XADD", jKey, "*", "type", "run_started", "at", tCreated, "workflow", "wf", "owner", "o",
		"task", taskID(0, 1))
}

// tDef is the definition version of the seeded runs (their field def).
const tDef = "D1"

// templateRun is a run of the named steps as fresh seeds them, for its
// template (templateFields).
func templateRun(names ...string) NewRun {
	r := NewRun{}
	for _, name := range names {
		r.Steps = append(r.Steps, NewStep{Name: name, MaxAttempts: 3, MaxCrashes: 1, Timeout: time.Minute,
			Policy: `{"p":"` + name + `"}`})
	}
	return r
}

// template writes the template of the named steps' definition as version
// sha (keys.go's definition).
func (w *world) template(sha string, names ...string) *world {
	args := []any{"HSET", tk.definition(sha)}
	for k, v := range templateFields(templateRun(names...)) {
		args = append(args, k, v)
	}
	return w.do(args...)
}

// abc is a fresh run of steps a, b and c.
func abc() *world { return fresh("a", "b", "c") }

// done marks the steps before idx succeeded (attempt 1, output {"out":"<i>"}).
func (w *world) done(idx int) *world {
	for i := range idx {
		w.step(i, "attempt", "1", "task", taskID(i, 1), "status", "succeeded", "attempts_started", "1",
			"started_at", tStarted+int64(i), "attempt_started_at", tStarted+int64(i), "finished_at", tStarted+int64(i)+1,
			"output", fmt.Sprintf(`{"out":%d}`, i), "fence", fmt.Sprintf("done:t%d", i))
	}
	return w
}

// pendingAt makes step idx current and due (attempt 1), after the earlier
// steps succeeded; the run is running (pending for idx 0).
func (w *world) pendingAt(idx int) *world {
	w.done(idx).step(idx, "attempt", "1", "task", taskID(idx, 1))
	if idx == 0 {
		return w
	}
	return w.set("status", "running", "started_at", tStarted, "current", idx, "iterations", idx,
		"updated_at", tAttempt).move("pending", "running").zadd(tk.active(), tAttempt, tRun)
}

// runningAt makes step idx current and running attempt 1 under fence token,
// live until tFence, after the earlier steps succeeded.
func (w *world) runningAt(idx int, token string) *world {
	w.done(idx).step(idx, "attempt", "1", "task", taskID(idx, 1), "status", "running", "fence", token,
		"fence_expires_at", tFence, "attempt_started_at", tAttempt, "attempts_started", "1", "started_at", tAttempt)
	return w.set("status", "running", "started_at", tStarted, "current", idx, "iterations", idx+1,
		"updated_at", tAttempt).move("pending", "running").zadd(tk.active(), tAttempt, tRun).
		zadd(tk.fences(), tFence, tRun)
}

// retryAt makes step idx wait for its attempt 2, due at due, after attempt
// 1 (fence tok) failed with a transient error.
func (w *world) retryAt(idx int, due int64) *world {
	return w.runningAt(idx, "tok").step(idx, "attempt", "2", "retry_attempts", "1", "retry_state", "scheduled",
		"next_attempt_at", due, "status", "pending", "task", taskID(idx, 2), "fence", "done:tok", "fence_expires_at", "0",
		"last_error", "boom", "last_error_class", "transient", "last_error_code", "", "last_error_at", tAttempt+1).
		set("warning", "retry_pending", "updated_at", tAttempt+1).zrem(tk.fences(), tRun).
		zadd(tk.scheduled(), due, tRun).zadd(tk.active(), tAttempt+1, tRun)
}

// failedAt ends the run as failed at step idx (its attempt 1 failed with a
// permanent error), needing attention, with the retention of a finished run.
func (w *world) failedAt(idx int) *world {
	return w.runningAt(idx, "tok").step(idx, "status", "failed", "fence", "done:tok", "fence_expires_at", "0",
		"finished_at", tAttempt+1, "last_error", "bad", "last_error_class", "permanent", "last_error_code", "",
		"last_error_at", tAttempt+1).
		set("status", "failed", "failure_code", "permanent_error", "failure_reason", "step failed", "needs_attention", "1",
			"updated_at", tAttempt+1, "finished_at", tAttempt+1).
		move("running", "failed").zrem(tk.active(), tRun).zrem(tk.fences(), tRun).
		zadd(tk.attention(), tAttempt+1, tRun).expiring()
}

// succeeded ends the run as succeeded: every step succeeded.
func (w *world) succeeded() *world {
	return w.done(w.n).set("status", "succeeded", "started_at", tStarted, "current", w.n-1, "iterations", w.n,
		"updated_at", tAttempt, "finished_at", tAttempt).move("pending", "succeeded").zrem(tk.active(), tRun).expiring()
}

// cancelledAt ends the run as cancelled while step idx was due.
func (w *world) cancelledAt(idx int) *world {
	w.pendingAt(idx).step(idx, "status", "cancelled", "finished_at", tAttempt).
		set("status", "cancelled", "failure_code", "cancelled", "failure_reason", "cancelled by x",
			"updated_at", tAttempt, "finished_at", tAttempt).zrem(tk.active(), tRun).expiring()
	if idx == 0 {
		return w.move("pending", "cancelled")
	}
	return w.move("running", "cancelled")
}

// luaCase is one run of a script.
type luaCase struct {
	name string
	seed *world
	// call is the script's KEYS and ARGV, by name (args.go); a run-level
	// script's start with tr's.
	call luaArgs
	// reply is the script's whole reply, as render writes it.
	reply string
}

// tr is the run-level KEYS and ARGV of every case: the seeded run, at tNow.
var tr = runArgs{Run: runKey, RunID: tRun, Prefix: tk.prefix, Now: tNow}

// luaTable is the cases of one script; the database each leaves is in
// testdata/scripts/<name>.golden.
type luaTable struct {
	name   string
	script *redis.Script
	cases  []luaCase
}

func (tb luaTable) run(t *testing.T) {
	// A Redis Cluster node that serves only the queue's slot: a script
	// that touches a key of another slot fails its case. Started before
	// t.Parallel, so that the tables' nodes wait out their start-up delay
	// together.
	node := redistest.StartClusterNodeLater(t, nil, runKey)
	t.Parallel()
	rdb := node(t).Client(t)
	ctx := context.Background()
	path := filepath.Join("testdata", "scripts", tb.name+".golden")
	golden := map[string]string{}
	if !*updateScriptTables {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		golden = parseGolden(t, string(b))
	}
	var out strings.Builder
	seen := map[string]bool{}
	for _, c := range tb.cases {
		if seen[c.name] {
			t.Fatalf("two cases named %q", c.name)
		}
		seen[c.name] = true
		keys, argv := c.call.args()
		if err := rdb.FlushDB(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		for _, cmd := range c.seed.cmds {
			if err := rdb.Do(ctx, cmd...).Err(); err != nil {
				t.Fatalf("%s: seed %v: %v", c.name, cmd, err)
			}
		}
		before := dumpDB(t, rdb)
		res, err := tb.script.Run(ctx, rdb, keys, argv...).Result()
		reply := renderReply(res, err)
		diff := diffDumps(before, dumpDB(t, rdb))
		fmt.Fprintf(&out, "=== %s\n%s", c.name, diff)
		if reply != c.reply {
			t.Errorf("%s: reply\n got %s\nwant %s", c.name, reply, c.reply)
		}
		if *updateScriptTables {
			continue
		}
		want, ok := golden[c.name]
		if !ok {
			t.Errorf("%s: not in %s (run with -update-script-tables); its writes:\n%s", c.name, path, diff)
		} else if diff != want {
			t.Errorf("%s: writes\n--- got\n%s--- want\n%s", c.name, diff, want)
		}
	}
	for name := range golden {
		if !seen[name] {
			t.Errorf("%s has case %q, which the table does not", path, name)
		}
	}
	if *updateScriptTables {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func parseGolden(t *testing.T, s string) map[string]string {
	t.Helper()
	out := map[string]string{}
	name := ""
	for _, line := range strings.SplitAfter(s, "\n") {
		if n, ok := strings.CutPrefix(line, "=== "); ok {
			name = strings.TrimSuffix(n, "\n")
			if _, dup := out[name]; dup {
				t.Fatalf("golden: two cases named %q", name)
			}
			out[name] = ""
			continue
		}
		if name == "" {
			if line != "" {
				t.Fatalf("golden: %q before the first case", line)
			}
			continue
		}
		out[name] += line
	}
	return out
}

// renderReply writes a script's reply: strings quoted, integers bare, nil
// as nil, arrays in brackets; an error as "error: <message>".
func renderReply(res any, err error) string {
	if err != nil {
		if errors.Is(err, redis.Nil) {
			return "nil"
		}
		return "error: " + err.Error()
	}
	switch v := res.(type) {
	case string:
		return strconv.Quote(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case nil:
		return "nil"
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = renderReply(e, nil)
		}
		return "[" + strings.Join(parts, " ") + "]"
	}
	return fmt.Sprintf("%T(%v)", res, res)
}

// dumpDB reads the whole database: one entry per hash field, sorted-set
// member, set member, string, list element and stream entry, and one per
// key's expiry, by a name that identifies it (type, key, field). Key names
// are shown without the queue's prefix cairn:{q}:.
// movedJournalLines renders the journal entries compact_run moved into the
// hash of run id (read with journal.lua, which leaves nothing behind), as
// streamFieldsInOrder renders a stream's (but the fields after type and at
// are sorted).
func movedJournalLines(t *testing.T, rdb *redis.Client, id string) []string {
	t.Helper()
	res, err := loadScripts().journal.Run(context.Background(), rdb, []string{tk.run(id), tk.journalTemp(id)}).Result()
	if err != nil {
		t.Fatalf("run %s: %v", id, err)
	}
	entries, err := parseXRange(res)
	if err != nil {
		t.Fatalf("run %s: %v", id, err)
	}
	out := make([]string, len(entries))
	for i, e := range entries {
		f := maps.Clone(e.Fields)
		if f == nil {
			f = map[string]string{}
		}
		if e.Step != "" {
			f["step"] = e.Step
		}
		if e.Attempt != 0 {
			f["attempt"] = strconv.Itoa(e.Attempt)
		}
		parts := []string{"type=" + strconv.Quote(e.Type), "at=" + strconv.Quote(strconv.FormatInt(e.At.UnixMilli(), 10))}
		for _, k := range slices.Sorted(maps.Keys(f)) {
			parts = append(parts, k+"="+strconv.Quote(f[k]))
		}
		out[i] = strings.Join(parts, " ")
	}
	return out
}

func dumpDB(t *testing.T, rdb *redis.Client) map[string]string {
	t.Helper()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	// The expiries first, in one round trip, as close to the script as can
	// be (they are rounded to the second; reading every key takes longer,
	// under the race detector on a busy machine).
	pipe := rdb.Pipeline()
	pttls := make([]*redis.DurationCmd, len(keys))
	for i, key := range keys {
		pttls[i] = pipe.PTTL(ctx, key)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for ki, key := range keys {
		short := strings.TrimPrefix(key, tk.prefix)
		typ, err := rdb.Type(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		switch typ {
		case "hash":
			h, err := rdb.HGetAll(ctx, key).Result()
			if err != nil {
				t.Fatal(err)
			}
			if h["jn"] != "" {
				// A compact run's journal (compact_run): its entries, without
				// their IDs (the server's clock), as a stream's below.
				for i, line := range movedJournalLines(t, rdb, strings.TrimPrefix(short, "run:")) {
					out[fmt.Sprintf("J %s:j[%d]", short, i)] = line
				}
			}
			for f, v := range h {
				if f == "jn" || (len(f) > 1 && f[0] == 'j' && f[1] >= '0' && f[1] <= '9') {
					continue
				}
				out["H "+short+" "+f] = strconv.Quote(v)
			}
		case "zset":
			zs, err := rdb.ZRangeWithScores(ctx, key, 0, -1).Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, z := range zs {
				score := strconv.FormatFloat(z.Score, 'f', -1, 64)
				member, ok := z.Member.(string)
				if !ok {
					t.Fatalf("key %s: member %#v is not a string", key, z.Member)
				}
				out["Z "+short+" "+member] = score
			}
		case "set":
			ms, err := rdb.SMembers(ctx, key).Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range ms {
				out["S "+short+" "+m] = "member"
			}
		case "string":
			v, err := rdb.Get(ctx, key).Result()
			if err != nil {
				t.Fatal(err)
			}
			out["V "+short] = strconv.Quote(v)
		case "list":
			l, err := rdb.LRange(ctx, key, 0, -1).Result()
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range l {
				out[fmt.Sprintf("L %s[%d]", short, i)] = strconv.Quote(v)
			}
		case "stream":
			xs, err := rdb.XRange(ctx, key, "-", "+").Result()
			if err != nil {
				t.Fatal(err)
			}
			for i, x := range xs {
				out[fmt.Sprintf("X %s[%d]", short, i)] = streamFieldsInOrder(t, rdb, key, x.ID)
			}
		default:
			t.Fatalf("key %s: type %s", key, typ)
		}
		if pttl := pttls[ki].Val(); pttl > 0 {
			// Rounded to the second: the case takes milliseconds.
			out["T "+short] = fmt.Sprintf("%ds", int64(math.Round(pttl.Seconds())))
		}
	}
	return out
}

// streamFieldsInOrder returns the field/value pairs of one stream entry, in
// the order the script wrote them (go-redis's XMessage is a map).
func streamFieldsInOrder(t *testing.T, rdb *redis.Client, key, id string) string {
	t.Helper()
	res, err := rdb.Do(context.Background(), "XRANGE", key, id, id).Slice()
	if err != nil || len(res) != 1 {
		t.Fatalf("XRANGE %s %s: %v %v", key, id, res, err)
	}
	entry, ok := res[0].([]any)
	if !ok || len(entry) != 2 {
		t.Fatalf("XRANGE %s %s: entry %#v", key, id, res[0])
	}
	kv, ok := entry[1].([]any)
	if !ok {
		t.Fatalf("XRANGE %s %s: fields %#v", key, id, entry[1])
	}
	parts := make([]string, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		v, ok := kv[i+1].(string)
		if !ok {
			t.Fatalf("XRANGE %s %s: value %#v", key, id, kv[i+1])
		}
		parts = append(parts, fmt.Sprintf("%s=%s", kv[i], strconv.Quote(v)))
	}
	return strings.Join(parts, " ")
}

// diffDumps writes what changed from before to after, one line per entry,
// sorted by entry: "+ name = value" (new), "- name = value" (gone), "~ name
// = old -> new" (changed).
func diffDumps(before, after map[string]string) string {
	names := map[string]bool{}
	for n := range before {
		names[n] = true
	}
	for n := range after {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	slices.Sort(sorted)
	var b strings.Builder
	for _, n := range sorted {
		old, had := before[n]
		cur, has := after[n]
		switch {
		case had && !has:
			fmt.Fprintf(&b, "- %s = %s\n", n, old)
		case !had && has:
			fmt.Fprintf(&b, "+ %s = %s\n", n, cur)
		case old != cur:
			fmt.Fprintf(&b, "~ %s = %s -> %s\n", n, old, cur)
		}
	}
	return b.String()
}

// createCall is a create of steps a, b and c as fresh seeds them, with
// the given owner, idempotency key and run limits, without an idempotency
// key's keys (the placeholders) or a first task.
func createCall(owner, idem string, runTimeout int64, maxIter int, stepRunTimeout ...int64) createLua {
	none := tk.idempotencyNone()
	a := createLua{runArgs: tr, Idem: none, LegacyIdem: none, FirstTask: taskKey(""), Pending: tk.asynqPending(),
		Seed: none, Workflow: "wf", Input: `{"n":1}`, Owner: owner, IdemKey: idem, Def: tDef, RunTimeout: runTimeout,
		MaxIterations: maxIter}
	for i, name := range []string{"a", "b", "c"} {
		var rt int64
		if i < len(stepRunTimeout) {
			rt = stepRunTimeout[i]
		}
		a.Steps = append(a.Steps, createStepLua{Name: name, Optional: "0", MaxAttempts: 3, MaxCrashes: 1, Timeout: 60000,
			Policy: `{"p":"` + name + `"}`, RunTimeout: rt})
	}
	return a
}

// keyed is c with the keys of idempotency keys idem and legacy.
func keyed(c createLua, idem, legacy string) createLua {
	c.Idem, c.LegacyIdem = idem, legacy
	return c
}

// The seed of a fresh run is what create.lua writes: the other tables start
// from states create and the scripts after it make.
func TestSeedIsWhatCreateWrites(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t, nil).Client(t)
	ctx := context.Background()
	call := createCall("o", "", 0, 0)
	call.Now = tCreated
	keys, argv := call.args()
	for _, cmd := range nothing().template(tDef, "a", "b", "c").cmds {
		if err := rdb.Do(ctx, cmd...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	res, err := loadScripts().create.Run(ctx, rdb, keys, argv...).Result()
	if got := renderReply(res, err); got != `["created" "R1_s0_a1" "1" "0"]` {
		t.Fatalf("create: %s", got)
	}
	created := dumpDB(t, rdb)
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range abc().cmds {
		if err := rdb.Do(ctx, cmd...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if d := diffDumps(created, dumpDB(t, rdb)); d != "" {
		t.Fatalf("the seed differs from what create wrote (- create, + seed):\n%s", d)
	}
}

func TestScriptCreate(t *testing.T) {
	owned, legacy := tk.idempotency("o", "k"), tk.legacyIdempotency("k")
	luaTable{name: "create", script: loadScripts().create,
		cases: []luaCase{
			{name: "created: three steps, no limits", seed: nothing(), call: createCall("o", "", 0, 0),
				reply: `["created" "R1_s0_a1" "1" "0"]`},
			{name: "created: a run timeout and an iteration ceiling", seed: nothing(),
				call: createCall("o", "", 60000, 10), reply: `["created" "R1_s0_a1" "1" "0"]`},
			{name: "created: the first step's run timeout wins", seed: nothing(),
				call: createCall("o", "", 60000, 0, 30000, 90000), reply: `["created" "R1_s0_a1" "1" "0"]`},
			{name: "created: an owned idempotency key", seed: nothing(),
				call: keyed(createCall("o", "k", 0, 0), owned, legacy), reply: `["created" "R1_s0_a1" "1" "0"]`},
			{name: "created: an idempotency key without an owner", seed: nothing(),
				call: keyed(createCall("", "k", 0, 0), legacy, legacy), reply: `["created" "R1_s0_a1" "1" "0"]`},
			{name: "exists: the key started a run", seed: nothing().do("SET", owned, "R0"),
				call: keyed(createCall("o", "k", 0, 0), owned, legacy), reply: `["exists" "R0"]`},
			{name: "exists: the unscoped key started a run of the same owner",
				seed: nothing().do("SET", legacy, "R0").do("HSET", tk.run("R0"), "owner", "o"),
				call: keyed(createCall("o", "k", 0, 0), owned, legacy), reply: `["exists" "R0"]`},
			{name: "created: the unscoped key started a run of another owner",
				seed: nothing().do("SET", legacy, "R0").do("HSET", tk.run("R0"), "owner", "p"),
				call: keyed(createCall("o", "k", 0, 0), owned, legacy), reply: `["created" "R1_s0_a1" "1" "0"]`},
			{name: "created: the unscoped key names a run that is gone",
				seed: nothing().do("SET", legacy, "R0"), call: keyed(createCall("o", "k", 0, 0), owned, legacy), reply: `["created" "R1_s0_a1" "1" "0"]`},
			{name: "error: the run ID is taken", seed: abc(), call: createCall("o", "", 0, 0), reply: `error: ERR cairn: run ID collision R1`},
		},
	}.run(t)
}

// beginCall is a begin of task (step idx) by token, with a 10s fence.
//
//nolint:unparam // each case names the token it begins with, next to the fence it seeds
func beginCall(idx int, task, token string) beginLua {
	return beginLua{runArgs: tr, Task: task, Token: token, FenceTTL: 10000, Index: idx, Retention: tKeep}
}

// withWorker is b made by worker "host:1:w".
func withWorker(b beginLua) beginLua {
	b.Worker = "host:1:w"
	return b
}

func TestScriptBegin(t *testing.T) {
	crashed := func() *world { // attempt 1 of step 0, whose worker stopped renewing its fence
		return abc().runningAt(0, "old").step(0, "fence_expires_at", tNow-1).zadd(tk.fences(), tNow-1, tRun)
	}
	snoozed := func(due int64) *world { // attempt 1 of step 0 snoozed until due (snooze.lua)
		return abc().runningAt(0, "x").step(0, "status", "pending", "fence", "done:x", "fence_expires_at", "0",
			"task", taskID(0, 1)+"_g1", "gen", "1", "resuming", "snoozed", "retry_state", "scheduled",
			"next_attempt_at", due, "snoozes", "1").zrem(tk.fences(), tRun).zadd(tk.scheduled(), due, tRun)
	}
	handedBack := func(resuming string, crashes int) *world { // attempt 1 of step 0, re-dispatched as gen 1
		return abc().runningAt(0, "old").step(0, "status", "pending", "fence", "", "fence_expires_at", "0",
			"gen", "1", "task", taskID(0, 1)+"_g1", "resuming", resuming, "crashes", crashes).zrem(tk.fences(), tRun)
	}
	luaTable{name: "begin", script: loadScripts().begin,
		cases: []luaCase{
			{name: "gone", seed: nothing(), call: beginCall(0, taskID(0, 1), "tok"), reply: `["gone"]`},
			{name: "ended: succeeded", seed: abc().succeeded(), call: beginCall(2, taskID(2, 1), "tok"), reply: `["ended" "succeeded"]`},
			{name: "ended: cancelled", seed: abc().cancelledAt(1), call: beginCall(1, taskID(1, 1), "tok"), reply: `["ended" "cancelled"]`},
			{name: "stale: an earlier step's task", seed: abc().pendingAt(1), call: beginCall(0, taskID(0, 1), "tok"),
				reply: `["stale" "1" "b" "1" "0" "0" "60000"]`},
			{name: "stale: an earlier attempt's task", seed: abc().retryAt(0, tNow-1),
				call: beginCall(0, taskID(0, 1), "tok"), reply: `["stale" "0" "a" "2" "0" "1799999999999" "60000"]`},
			{name: "stale: the current step is running", seed: abc().runningAt(1, "t1"),
				call: beginCall(0, taskID(0, 1), "tok"), reply: `["stale"]`},
			{name: "stale: an earlier gen's task", seed: handedBack("1", 1), call: beginCall(0, taskID(0, 1), "tok"),
				reply: `["stale" "0" "a" "1" "1" "0" "60000"]`},
			{name: "busy: another delivery's fence is live", seed: abc().runningAt(0, "other"),
				call: beginCall(0, taskID(0, 1), "tok"), reply: `["busy" "5000"]`},
			{name: "ok: a snoozed visit resumes its attempt", seed: snoozed(tNow - 1),
				call:  beginCall(0, taskID(0, 1)+"_g1", "tok"),
				reply: `["ok" "1" "0" "snoozed" "{\"n\":1}" "{\"p\":\"a\"}" "1" "0" "b" "0" "60000"]`},
			{name: "early: a snoozed visit is not due", seed: snoozed(tNow + 2000),
				call: beginCall(0, taskID(0, 1)+"_g1", "tok"), reply: `["early" "2000"]`},
			{name: "early: the retry is not due", seed: abc().retryAt(0, tNow+2000),
				call: beginCall(0, taskID(0, 2), "tok"), reply: `["early" "2000"]`},
			{name: "ok: the first attempt of a fresh run", seed: abc(), call: beginCall(0, taskID(0, 1), "tok"),
				reply: `["ok" "1" "0" "0" "{\"n\":1}" "{\"p\":\"a\"}" "1" "0" "b" "0" "60000"]`},
			{name: "ok: a middle step", seed: abc().pendingAt(1), call: beginCall(1, taskID(1, 1), "tok"), reply: `["ok" "1" "0" "0" "{\"n\":1}" "{\"p\":\"b\"}" "1" "0" "c" "0" "60000" "a" "{\"out\":0}"]`},
			{name: "ok: the worker that begins it recorded", seed: abc().pendingAt(1), call: withWorker(beginCall(1, taskID(1, 1), "tok")),
				reply: `["ok" "1" "0" "0" "{\"n\":1}" "{\"p\":\"b\"}" "1" "0" "c" "0" "60000" "a" "{\"out\":0}"]`},
			{name: "ok: the last step", seed: abc().pendingAt(2), call: beginCall(2, taskID(2, 1), "tok"), reply: `["ok" "1" "0" "0" "{\"n\":1}" "{\"p\":\"c\"}" "1" "0" "" "0" "0" "a" "{\"out\":0}" "b" "{\"out\":1}"]`},
			{name: "ok: the same delivery asks again", seed: abc().runningAt(1, "tok"),
				call: beginCall(1, taskID(1, 1), "tok"), reply: `["ok" "1" "0" "0" "{\"n\":1}" "{\"p\":\"b\"}" "1" "0" "c" "0" "60000" "a" "{\"out\":0}"]`},
			{name: "ok: a due retry", seed: abc().retryAt(0, tNow), call: beginCall(0, taskID(0, 2), "tok"), reply: `["ok" "2" "0" "0" "{\"n\":1}" "{\"p\":\"a\"}" "2" "0" "b" "0" "60000"]`},
			{name: "ok: a crash found here", seed: crashed(), call: beginCall(0, taskID(0, 1), "tok"), reply: `["ok" "1" "1" "1" "{\"n\":1}" "{\"p\":\"a\"}" "1" "0" "b" "0" "60000"]`},
			{name: "failed: a crash past the crash budget", seed: crashed().step(0, "crashes", "1").idem(),
				call: beginCall(0, taskID(0, 1), "tok"), reply: `["failed" "crash_budget_exhausted" "step \"a\": worker crashed 2 times during attempt 1 (max_crashes 1)" ""]`},
			{name: "ok: an attempt the reconciler re-dispatched", seed: handedBack("1", 1),
				call: beginCall(0, taskID(0, 1)+"_g1", "tok"), reply: `["ok" "1" "1" "1" "{\"n\":1}" "{\"p\":\"a\"}" "1" "0" "b" "0" "60000"]`},
			{name: "ok: an attempt its worker handed back", seed: handedBack("interrupted", 0),
				call: beginCall(0, taskID(0, 1)+"_g1", "tok"), reply: `["ok" "1" "0" "interrupted" "{\"n\":1}" "{\"p\":\"a\"}" "1" "0" "b" "0" "60000"]`},
			{name: "ok: before the deadline",
				seed: abc().set("run_timeout_ms", "60000", "deadline", tNow+1).zadd(tk.deadlines(), tNow+1, tRun),
				call: beginCall(0, taskID(0, 1), "tok"), reply: `["ok" "1" "0" "0" "{\"n\":1}" "{\"p\":\"a\"}" "1" "1800000000001" "b" "0" "60000"]`},
			{name: "failed: the run's deadline passed",
				seed: abc().pendingAt(1).set("run_timeout_ms", "60000", "deadline", tNow).zadd(tk.deadlines(), tNow, tRun),
				call: beginCall(1, taskID(1, 1), "tok"), reply: `["failed" "run_timeout" "run passed its deadline (run_timeout 60s) before step \"b\" attempt 1" ""]`},
			{name: "failed: the deadline of the step's run timeout passed",
				seed: abc().pendingAt(1).step(1, "run_timeout_ms", "1500").set("deadline", tCreated+1500).
					zadd(tk.deadlines(), tCreated+1500, tRun),
				call: beginCall(1, taskID(1, 1), "tok"), reply: `["failed" "run_timeout" "run passed its deadline (run_timeout 1500ms) before step \"b\" attempt 1" ""]`},
			{name: "failed: the run's iteration ceiling", seed: abc().pendingAt(1).set("max_iterations", "1"),
				call: beginCall(1, taskID(1, 1), "tok"), reply: `["failed" "max_iterations_exceeded" "run reached max_iterations 1 before step \"b\" attempt 1" ""]`},
			{name: "ok: the step's iteration ceiling wins",
				seed: abc().pendingAt(1).set("max_iterations", "1").step(1, "max_iterations", "5"),
				call: beginCall(1, taskID(1, 1), "tok"), reply: `["ok" "1" "0" "0" "{\"n\":1}" "{\"p\":\"b\"}" "1" "0" "c" "0" "60000" "a" "{\"out\":0}"]`},
			{name: "failed: the step's iteration ceiling",
				seed: abc().pendingAt(2).set("max_iterations", "9").step(2, "max_iterations", "2"),
				call: beginCall(2, taskID(2, 1), "tok"), reply: `["failed" "max_iterations_exceeded" "run reached max_iterations 2 before step \"c\" attempt 1" ""]`},
			{name: "ok: a fresh budget after an operator's retry",
				seed: abc().step(0, "attempt", "4", "budget_base", "3", "task", taskID(0, 4)),
				call: beginCall(0, taskID(0, 4), "tok"), reply: `["ok" "4" "0" "0" "{\"n\":1}" "{\"p\":\"a\"}" "1" "0" "b" "0" "60000"]`},
		},
	}.run(t)
}

// completeCase is a complete of step idx by token, predicting the next
// step's task next ("" for none).
func completeCase(name string, seed *world, idx int, token, next, reply string) luaCase {
	return luaCase{name: name, seed: seed, call: completeCall(idx, token, next), reply: reply}
}

// completeCall is a complete of step idx by token, predicting the next
// step's task next ("" for none).
func completeCall(idx int, token, next string) completeLua {
	return completeLua{checkpointLua: checkpointLua{runArgs: tr, NextTask: taskKey(next), Pending: tk.asynqPending(),
		Token: token, Index: idx, Output: fmt.Sprintf(`{"done":%d}`, idx), Retention: tKeep, NextID: next,
		NextMsg: []byte("MSG")}}
}

// inlineBy is the complete call of an inlineCase whose next step worker
// begins.
func inlineBy(call luaArgs, worker string) completeLua {
	c, ok := call.(completeLua)
	if !ok {
		panic("inlineCase makes no completeLua")
	}
	c.InlineWorker = worker
	return c
}

// inlineCase is a completeCase that asks to begin the next step inline,
// under token "tok2" with a fence TTL of 10s.
func inlineCase(name string, seed *world, idx int, reply string) luaCase {
	call := completeCall(idx, "tok", taskID(idx+1, 1))
	call.InlineToken, call.InlineTTL = "tok2", 10000
	return luaCase{name: name, seed: seed, call: call, reply: reply}
}

// delivered is w with the task of step idx's attempt 1 active under a
// lease, as Cairn's own dequeue leaves a task it took. (The day's processed
// counter exists already: its first INCR sets an expiry the table would
// show relative to the wall clock; tasks' tests cover that one.)
func (w *world) delivered(idx int) *world {
	q, id := tasks.QueueKeys(tQueue), taskID(idx, 1)
	return w.do("LPUSH", q.Active(), id).do("ZADD", q.Lease(), tNow/1000+30, id).
		do("HSET", q.Task(id), "msg", "MSG", "state", "active").do("SET", q.ProcessedOn(time.UnixMilli(tNow)), "7")
}

// ackCall acknowledges step idx's attempt-1 task, whose record has no
// retention.
func ackCall(idx int) ackLua {
	q, id := tasks.QueueKeys(tQueue), taskID(idx, 1)
	now := time.UnixMilli(tNow)
	return ackOf(&tasks.DoneArgs{Active: q.Active(), Lease: q.Lease(), Task: q.Task(id), Day: q.ProcessedOn(now),
		Total: q.Processed(), Completed: q.Completed(), ID: id, StatsExpiry: tNow/1000 + 90*24*3600, KeepUntil: "0"})
}

// ackCase is a completeCase that also acknowledges step idx's attempt-1
// task (CompleteParams.Ack), whose record has no retention; inline_token,
// when set, asks to begin the next step inline.
func ackCase(name string, seed *world, idx int, token, next, inlineToken, reply string) luaCase {
	call := completeLua{checkpointLua: completeCall(idx, token, next).checkpointLua, ackLua: ackCall(idx)}
	if inlineToken != "" {
		call.InlineToken, call.InlineTTL = inlineToken, 10000
	}
	return luaCase{name: name, seed: seed, call: call, reply: reply}
}

func TestScriptComplete(t *testing.T) {
	deadline := func(w *world, d int64) *world {
		return w.set("run_timeout_ms", "60000", "deadline", d).zadd(tk.deadlines(), d, tRun)
	}
	luaTable{name: "complete", script: loadScripts().complete,
		cases: []luaCase{
			completeCase("next: its task written", abc().runningAt(0, "tok"), 0, "tok", taskID(1, 1), `["next" "1" "b" "1" "60000" "1"]`),
			completeCase("next: no task predicted", abc().runningAt(0, "tok"), 0, "tok", "", `["next" "1" "b" "1" "60000" "0"]`),
			inlineCase("inline: the next step begun here", abc().runningAt(0, "tok"), 0,
				`["inline" "1" "b" "1" "60000" "{\"p\":\"b\"}" "0" "c" "0" "60000"]`),
			{name: "inline: the worker that begins it recorded", seed: abc().runningAt(0, "tok"),
				call:  inlineBy(inlineCase("", nil, 0, "").call, "host:1:w"),
				reply: `["inline" "1" "b" "1" "60000" "{\"p\":\"b\"}" "0" "c" "0" "60000"]`},
			inlineCase("inline: the last step's next has no next", abc().runningAt(1, "tok"), 1,
				`["inline" "2" "c" "1" "60000" "{\"p\":\"c\"}" "0" "" "0" "0"]`),
			inlineCase("inline: not an await (its task instead)",
				abc().runningAt(0, "tok").step(1, "kind", "await", "signal", "go", "wait_ms", "60000"), 0,
				`["next" "1" "b" "1" "60000" "1"]`),
			inlineCase("inline: not behind a breaker", abc().runningAt(0, "tok").step(1, "breaker", "dep|5|60000|1000|10000"), 0,
				`["next" "1" "b" "1" "60000" "1"]`),
			inlineCase("inline: not past the deadline",
				deadline(abc().runningAt(0, "tok"), tNow), 0, `["next" "1" "b" "1" "60000" "1"]`),
			inlineCase("inline: not past the iteration ceiling", abc().runningAt(0, "tok").set("max_iterations", "1"), 0,
				`["next" "1" "b" "1" "60000" "1"]`),
			completeCase("next: a wrong prediction", abc().runningAt(1, "tok"), 1, "tok", taskID(2, 2), `["next" "2" "c" "1" "60000" "0"]`),
			completeCase("next: a step activated before starts afresh",
				abc().runningAt(0, "tok").step(1, "attempt", "2", "retry_attempts", "1", "retry_state", "exhausted",
					"next_attempt_at", tNow, "gen", "1", "fence", "done:x", "fence_expires_at", tNow, "status", "failed"),
				0, "tok", taskID(1, 3), `["next" "1" "b" "3" "60000" "1"]`),
			completeCase("next: the next step's run timeout moves the deadline",
				deadline(abc().runningAt(0, "tok"), tCreated+60000).step(1, "run_timeout_ms", "120000"),
				0, "tok", taskID(1, 1), `["next" "1" "b" "1" "60000" "1"]`),
			completeCase("next: the deadline stays", deadline(abc().runningAt(0, "tok"), tCreated+60000),
				0, "tok", taskID(1, 1), `["next" "1" "b" "1" "60000" "1"]`),
			completeCase("next: the deadline goes",
				abc().runningAt(0, "tok").step(0, "run_timeout_ms", "60000").set("deadline", tCreated+60000).
					zadd(tk.deadlines(), tCreated+60000, tRun),
				0, "tok", taskID(1, 1), `["next" "1" "b" "1" "60000" "1"]`),
			completeCase("succeeded: the last step", abc().runningAt(2, "tok"), 2, "tok", "", `["succeeded"]`),
			completeCase("succeeded: with a deadline and an idempotency key",
				deadline(abc().runningAt(2, "tok"), tNow+1).idem(), 2, "tok", "", `["succeeded"]`),
			completeCase("succeeded: a key from before keys were scoped",
				abc().runningAt(2, "tok").set("idempotency_key", "k").do("SET", tk.legacyIdempotency("k"), tRun),
				2, "tok", "", `["succeeded"]`),
			completeCase("fenced: run gone", nothing(), 0, "tok", taskID(1, 1), `["fenced" "run gone"]`),
			completeCase("fenced: run cancelled", abc().cancelledAt(0), 0, "tok", taskID(1, 1), `["fenced" "run cancelled"]`),
			completeCase("fenced: run pending", abc(), 0, "tok", taskID(1, 1), `["fenced" "run pending"]`),
			completeCase("fenced: another delivery's fence", abc().runningAt(0, "other"), 0, "tok", taskID(1, 1), `["fenced" "fence lost"]`),
			completeCase("fenced: the step is not running", abc().pendingAt(1), 1, "tok", taskID(2, 1), `["fenced" "fence lost"]`),
			completeCase("done: applied before, the run goes on", abc().pendingAt(1), 0, "t0", taskID(1, 1), `["done" "running"]`),
			completeCase("done: applied before, the run succeeded", abc().succeeded(), 2, "t2", "", `["done" "succeeded"]`),
			ackCase("ack: next, its task written, the delivery's task done", abc().runningAt(0, "tok").delivered(0), 0,
				"tok", taskID(1, 1), "", `["next" "1" "b" "1" "60000" "1" "acked"]`),
			ackCase("ack: not when the caller writes the next task", abc().runningAt(0, "tok").delivered(0), 0,
				"tok", "", "", `["next" "1" "b" "1" "60000" "0"]`),
			ackCase("ack: not when the next step is begun inline", abc().runningAt(0, "tok").delivered(0), 0,
				"tok", taskID(1, 1), "tok2", `["inline" "1" "b" "1" "60000" "{\"p\":\"b\"}" "0" "c" "0" "60000"]`),
			ackCase("ack: succeeded", abc().runningAt(2, "tok").delivered(2), 2, "tok", "", "", `["succeeded" "acked"]`),
			ackCase("ack: fenced", abc().runningAt(0, "other").delivered(0), 0, "tok", taskID(1, 1), "",
				`["fenced" "fence lost" "acked"]`),
			ackCase("ack: done, applied before", abc().pendingAt(1).delivered(0), 0, "t0", taskID(1, 1), "",
				`["done" "running" "acked"]`),
			ackCase("ack: done, the task acknowledged before", abc().pendingAt(1), 0, "t0", taskID(1, 1), "",
				`["done" "running" "acked"]`),
			ackCase("ack: not when done goes on inline", abc().pendingAt(1).delivered(0), 0, "t0", taskID(1, 1), "tok2",
				`["done" "running"]`),
		},
	}.run(t)
}

// failCase is a fail of step idx by token with an error of class after
// delay ms, predicting the retry's task retry ("" for none).
//
//nolint:unparam // each case names the token it fails with, next to the fence it seeds
func failCase(name string, seed *world, idx int, token, class string, delay int, retry, reply string) luaCase {
	return luaCase{name: name, seed: seed, call: failLua{runArgs: tr, RetryTask: taskKey(retry),
		Pending: tk.asynqPending(), Scheduled: tk.asynqScheduled(), Token: token, Index: idx, Message: "boom " + token,
		Class: class, Delay: int64(delay), Retention: tKeep, Code: "E1", RetryID: retry, RetryMsg: []byte("MSG")},
		reply: reply}
}

func TestScriptFail(t *testing.T) {
	luaTable{name: "fail", script: loadScripts().fail,
		cases: []luaCase{
			failCase("retry: scheduled, its task scheduled", abc().runningAt(0, "tok"), 0, "tok", "transient", 1500,
				taskID(0, 2), `["retry" "1800000001500" "2" "60000" "1"]`),
			failCase("retry: due now, its task pending", abc().runningAt(1, "tok"), 1, "tok", "transient", 0,
				taskID(1, 2), `["retry" "1800000000000" "2" "60000" "1"]`),
			failCase("retry: no task predicted", abc().runningAt(0, "tok"), 0, "tok", "transient", 1000, "", `["retry" "1800000001000" "2" "60000" "0"]`),
			failCase("retry: a wrong prediction", abc().runningAt(0, "tok"), 0, "tok", "transient", 1000,
				taskID(0, 3), `["retry" "1800000001000" "2" "60000" "0"]`),
			failCase("retry: the second of three attempts",
				abc().retryAt(0, tNow-3000).step(0, "status", "running", "fence", "tok", "fence_expires_at", tFence,
					"retry_state", "none", "next_attempt_at", "0").
					zrem(tk.scheduled(), tRun).zadd(tk.fences(), tFence, tRun).set("warning", ""),
				0, "tok", "transient", 1000, taskID(0, 3), `["retry" "1800000001000" "3" "60000" "1"]`),
			failCase("retry: a fresh budget after an operator's retry",
				abc().runningAt(0, "tok").step(0, "attempt", "5", "budget_base", "3", "task", taskID(0, 5)),
				0, "tok", "transient", 1000, taskID(0, 6), `["retry" "1800000001000" "6" "60000" "1"]`),
			failCase("failed: a permanent error", abc().runningAt(1, "tok").step(1, "optional", "1").idem(),
				1, "tok", "permanent", 1000, taskID(1, 2), `["failed" "permanent_error" "step \"b\" failed with a permanent error on attempt 1: boom tok" ""]`),
			failCase("failed: retries exhausted",
				abc().runningAt(0, "tok").step(0, "attempt", "3", "task", taskID(0, 3), "retry_attempts", "2"),
				0, "tok", "transient", 1000, taskID(0, 4), `["failed" "retries_exhausted" "step \"a\" failed after 3 attempts (max_attempts 3): boom tok" ""]`),
			failCase("failed: a permanent error after an operator's retry",
				abc().runningAt(0, "tok").step(0, "attempt", "5", "budget_base", "4", "task", taskID(0, 5)),
				0, "tok", "permanent", 1000, taskID(0, 6), `["failed" "permanent_error" "step \"a\" failed with a permanent error on attempt 5 (the first since it was started again): boom tok" ""]`),
			failCase("failed: a permanent error, the fourth attempt of a fresh budget",
				abc().runningAt(0, "tok").step(0, "attempt", "6", "budget_base", "2", "task", taskID(0, 6), "max_attempts", "5"),
				0, "tok", "permanent", 1000, taskID(0, 7), `["failed" "permanent_error" "step \"a\" failed with a permanent error on attempt 6 (the 4th since it was started again): boom tok" ""]`),
			failCase("failed: retries exhausted after an operator's retry",
				abc().runningAt(0, "tok").step(0, "attempt", "6", "budget_base", "3", "task", taskID(0, 6), "retry_attempts", "2"),
				0, "tok", "transient", 1000, taskID(0, 7), `["failed" "retries_exhausted" "step \"a\" failed after 3 attempts since it was started again, attempts 4 to 6 (max_attempts 3): boom tok" ""]`),
			failCase("failed: the retry would come after the deadline",
				abc().runningAt(0, "tok").set("run_timeout_ms", "60000", "deadline", tNow+1500).
					zadd(tk.deadlines(), tNow+1500, tRun),
				0, "tok", "transient", 1500, taskID(0, 2), `["failed" "run_timeout" "step \"a\" failed on attempt 1 and its next attempt would start after the run's deadline (run_timeout 60s): boom tok" ""]`),
			failCase("retry: just before the deadline",
				abc().runningAt(0, "tok").set("run_timeout_ms", "60000", "deadline", tNow+1501).
					zadd(tk.deadlines(), tNow+1501, tRun),
				0, "tok", "transient", 1500, taskID(0, 2), `["retry" "1800000001500" "2" "60000" "1"]`),
			failCase("fenced: run gone", nothing(), 0, "tok", "transient", 1000, taskID(0, 2), `["fenced" "run gone"]`),
			failCase("fenced: run cancelled", abc().cancelledAt(0), 0, "tok", "transient", 1000, taskID(0, 2), `["fenced" "run cancelled"]`),
			failCase("fenced: another delivery's fence", abc().runningAt(0, "other"), 0, "tok", "transient", 1000,
				taskID(0, 2), `["fenced" "fence lost"]`),
			failCase("fenced: the step is not running", abc().pendingAt(1), 1, "tok", "transient", 1000,
				taskID(1, 2), `["fenced" "fence lost"]`),
			failCase("done: applied before, a retry scheduled", abc().retryAt(0, tNow+1000), 0, "tok", "transient",
				1000, taskID(0, 2), `["done" "running" ""]`),
			failCase("done: applied before, the run failed", abc().failedAt(0), 0, "tok", "permanent", 1000,
				taskID(0, 2), `["done" "failed" "permanent_error"]`),
			failAckCase("ack: retry, its task written, the delivery's task done", abc().runningAt(0, "tok").delivered(0),
				"transient", taskID(0, 2), `["retry" "1800000001000" "2" "60000" "1" "acked"]`),
			failAckCase("ack: not when the caller writes the retry's task", abc().runningAt(0, "tok").delivered(0),
				"transient", "", `["retry" "1800000001000" "2" "60000" "0"]`),
			failAckCase("ack: failed", abc().runningAt(0, "tok").delivered(0), "permanent", taskID(0, 2),
				`["failed" "permanent_error" "step \"a\" failed with a permanent error on attempt 1: boom tok" "" "acked"]`),
			failAckCase("ack: fenced", abc().runningAt(0, "other").delivered(0), "transient", taskID(0, 2),
				`["fenced" "fence lost" "acked"]`),
			failAckCase("ack: done, applied before", abc().retryAt(0, tNow+1000).delivered(0), "transient", taskID(0, 2),
				`["done" "running" "" "acked"]`),
		},
	}.run(t)
}

// failAckCase is a failCase of step 0 by "tok" after 1000 ms that also
// acknowledges its attempt-1 task (FailParams.Ack), as ackCase.
func failAckCase(name string, seed *world, class, retry, reply string) luaCase {
	c := failCase(name, seed, 0, "tok", class, 1000, retry, reply)
	call, ok := c.call.(failLua)
	if !ok {
		panic("failCase makes no failLua")
	}
	call.ackLua = ackCall(0)
	c.call = call
	return c
}

// releaseCase is a release of step idx by token, predicting the new
// dispatch's task next ("" for none).
//
//nolint:unparam // each case names the token it releases with, next to the fence it seeds
func releaseCase(name string, seed *world, idx int, token, next, reply string) luaCase {
	return luaCase{name: name, seed: seed, call: releaseLua{runArgs: tr, NextTask: taskKey(next),
		Pending: tk.asynqPending(), Token: token, Index: idx, NextID: next, NextMsg: []byte("MSG")}, reply: reply}
}

func TestScriptRelease(t *testing.T) {
	luaTable{name: "release", script: loadScripts().release,
		cases: []luaCase{
			releaseCase("released: its task written", abc().runningAt(0, "tok"), 0, "tok", taskID(0, 1)+"_g1", `["released" "0" "a" "1" "1" "60000" "1"]`),
			releaseCase("released: no task predicted", abc().runningAt(0, "tok"), 0, "tok", "", `["released" "0" "a" "1" "1" "60000" "0"]`),
			releaseCase("released: the next gen",
				abc().runningAt(1, "tok").step(1, "gen", "2", "task", taskID(1, 1)+"_g2"), 1, "tok",
				taskID(1, 1)+"_g3", `["released" "1" "b" "1" "3" "60000" "1"]`),
			releaseCase("fenced: run gone", nothing(), 0, "tok", "", `["fenced" "run gone"]`),
			releaseCase("fenced: run failed", abc().failedAt(0), 0, "tok", "", `["fenced" "run failed"]`),
			releaseCase("fenced: another delivery's fence", abc().runningAt(0, "other"), 0, "tok", "", `["fenced" "fence lost"]`),
			releaseCase("fenced: the step is not running", abc().pendingAt(1), 1, "tok", "", `["fenced" "fence lost"]`),
		},
	}.run(t)
}

func TestScriptCancel(t *testing.T) {
	call := cancelLua{runArgs: tr, Actor: "alice", Retention: tKeep}
	luaTable{name: "cancel", script: loadScripts().cancel,
		cases: []luaCase{
			{name: "cancelled: a pending run", seed: abc(), call: call, reply: `["cancelled" "R1_s0_a1" "pending"]`},
			{name: "cancelled: a running step", seed: abc().runningAt(1, "tok"), call: call, reply: `["cancelled" "R1_s1_a1" "running"]`},
			{name: "cancelled: a scheduled retry, with a deadline and an idempotency key",
				seed: abc().retryAt(0, tNow+1000).set("run_timeout_ms", "60000", "deadline", tCreated+60000).
					zadd(tk.deadlines(), tCreated+60000, tRun).idem(),
				call: call, reply: `["cancelled" "R1_s0_a2" "pending"]`},
			{name: "already", seed: abc().cancelledAt(1), call: call, reply: `["already" "cancelled"]`},
			{name: "ended: failed", seed: abc().failedAt(0), call: call, reply: `["ended" "failed"]`},
			{name: "ended: succeeded", seed: abc().succeeded(), call: call, reply: `["ended" "succeeded"]`},
			{name: "gone", seed: nothing(), call: call, reply: `["gone"]`},
		},
	}.run(t)
}

func TestScriptRenew(t *testing.T) {
	call := func(token string, idx int) renewLua {
		return renewLua{Run: runKey, Fences: tk.fences(), Token: token, Now: tNow, TTL: 10000, RunID: tRun, Index: idx}
	}
	luaTable{name: "renew", script: loadScripts().renew,
		cases: []luaCase{
			{name: "renewed", seed: abc().runningAt(1, "tok"), call: call("tok", 1), reply: `1`},
			{name: "renewed: an expired fence nobody took", seed: abc().runningAt(0, "tok").step(0, "fence_expires_at", tNow-1),
				call: call("tok", 0), reply: `1`},
			{name: "lost: another delivery's fence", seed: abc().runningAt(1, "other"), call: call("tok", 1), reply: `0`},
			{name: "lost: the step is not running", seed: abc().pendingAt(1), call: call("tok", 1), reply: `0`},
			{name: "lost: another step", seed: abc().runningAt(1, "tok"), call: call("tok", 0), reply: `0`},
			{name: "stopped: run failed", seed: abc().failedAt(0), call: call("tok", 0), reply: `-1`},
			{name: "stopped: run pending", seed: abc(), call: call("tok", 0), reply: `-1`},
			{name: "stopped: run gone", seed: nothing(), call: call("tok", 0), reply: `-1`},
		},
	}.run(t)
}

func TestScriptTimeout(t *testing.T) {
	call := timeoutLua{runArgs: tr, Retention: tKeep}
	deadline := func(w *world, d int64) *world {
		return w.set("run_timeout_ms", "60000", "deadline", d).zadd(tk.deadlines(), d, tRun)
	}
	luaTable{name: "timeout", script: loadScripts().timeout,
		cases: []luaCase{
			{name: "noop: run gone", seed: nothing().zadd(tk.deadlines(), tNow, tRun), call: call, reply: `["noop" "run gone"]`},
			{name: "noop: run succeeded", seed: abc().succeeded().zadd(tk.deadlines(), tNow, tRun), call: call,
				reply: `["noop" "run succeeded"]`},
			{name: "noop: no deadline", seed: abc().zadd(tk.deadlines(), tNow, tRun), call: call, reply: `["noop" "no deadline"]`},
			{name: "noop: not due", seed: deadline(abc(), tNow+1).zadd(tk.deadlines(), tNow, tRun), call: call,
				reply: `["noop" "not due"]`},
			{name: "failed: a running step", seed: deadline(abc().runningAt(1, "tok"), tNow), call: call, reply: `["failed" "R1_s1_a1" "running" "run passed its deadline (run_timeout 60s) during step \"b\" (attempt 1)" ""]`},
			{name: "failed: a scheduled retry", seed: deadline(abc().retryAt(0, tNow+1000), tNow-1).idem(), call: call,
				reply: `["failed" "R1_s0_a2" "pending" "run passed its deadline (run_timeout 60s) during step \"a\" (attempt 2)" ""]`},
			{name: "failed: a pending step, under the step's run timeout",
				seed: abc().pendingAt(2).step(2, "run_timeout_ms", "2500").set("deadline", tNow-7).
					zadd(tk.deadlines(), tNow-7, tRun),
				call: call, reply: `["failed" "R1_s2_a1" "pending" "run passed its deadline (run_timeout 2500ms) during step \"c\" (attempt 1)" ""]`},
		},
	}.run(t)
}

func TestScriptRedispatch(t *testing.T) {
	call := redispatchLua{runArgs: tr, MaxAuto: 3, Retention: tKeep}
	dead := func() *world { // attempt 1 of step 1, whose fence expired
		return abc().runningAt(1, "old").step(1, "fence_expires_at", tNow).zadd(tk.fences(), tNow, tRun)
	}
	luaTable{name: "redispatch", script: loadScripts().redispatch,
		cases: []luaCase{
			{name: "noop: run gone", seed: nothing().zadd(tk.fences(), tNow, tRun), call: call, reply: `["noop" "run gone"]`},
			{name: "noop: run failed", seed: abc().failedAt(1).zadd(tk.fences(), tNow, tRun), call: call, reply: `["noop" "run failed"]`},
			{name: "noop: the step is not running", seed: abc().pendingAt(1).zadd(tk.fences(), tNow, tRun), call: call,
				reply: `["noop" "step pending"]`},
			{name: "noop: the fence is alive", seed: abc().runningAt(1, "tok").zadd(tk.fences(), tNow, tRun),
				call: call, reply: `["noop" "fence alive"]`},
			{name: "noop: the run needs attention", seed: dead().set("needs_attention", "1"), call: call, reply: `["noop" "needs attention"]`},
			{name: "redispatched", seed: dead(), call: call, reply: `["redispatched" "1" "b" "1" "1" "60000" "1" "wf"]`},
			{name: "redispatched: a later gen", seed: dead().step(1, "gen", "2", "task", taskID(1, 1)+"_g2"),
				call: call, reply: `["redispatched" "1" "b" "1" "3" "60000" "1" "wf"]`},
			{name: "failed: the crash budget is spent", seed: dead().step(1, "crashes", "1"), call: call, reply: `["failed" "crash_budget_exhausted" "step \"b\": worker crashed 2 times during attempt 1 (max_crashes 1)" ""]`},
			{name: "attention: repaired too often", seed: dead().set("auto_recoveries", "3"), call: call, reply: `["attention" "repaired automatically 3 times (max_auto_recoveries 3); left for an operator (last: crashed attempt)"]`},
		},
	}.run(t)
}

func TestScriptRepair(t *testing.T) {
	call := func(task, trouble string) repairLua {
		return repairLua{runArgs: tr, Task: task, Trouble: trouble, MaxAuto: 3}
	}
	luaTable{name: "repair", script: loadScripts().repair,
		cases: []luaCase{
			{name: "noop: run gone", seed: nothing(), call: call(taskID(0, 1), "missing"), reply: `["noop" "run gone"]`},
			{name: "noop: run cancelled", seed: abc().cancelledAt(0), call: call(taskID(0, 1), "missing"), reply: `["noop" "run cancelled"]`},
			{name: "noop: the run needs attention", seed: abc().set("needs_attention", "1"),
				call: call(taskID(0, 1), "missing"), reply: `["noop" "needs attention"]`},
			{name: "noop: another task", seed: abc().pendingAt(1), call: call(taskID(0, 1), "missing"), reply: `["noop" "state moved on"]`},
			{name: "noop: the step is running", seed: abc().runningAt(1, "tok"), call: call(taskID(1, 1), "stalled"),
				reply: `["noop" "state moved on"]`},
			{name: "repair: a missing task", seed: abc().pendingAt(1), call: call(taskID(1, 1), "missing"), reply: `["repair" "1" "b" "1" "0" "0" "60000" "task_missing" "wf"]`},
			{name: "repair: a task found missing, since written, is not written again",
				seed: abc().pendingAt(1).do("HSET", taskKey(taskID(1, 1)), "msg", "m", "state", "pending"),
				call: call(taskID(1, 1), "missing"), reply: `["repair" "1" "b" "1" "0" "0" "60000" "task_missing" "wf"]`},
			{name: "repair: a missing retry task", seed: abc().retryAt(0, tNow+1000),
				call: call(taskID(0, 2), "missing"), reply: `["repair" "0" "a" "2" "0" "1800000001000" "60000" "retry_task_missing" "wf"]`},
			{name: "repair: an archived task", seed: abc(), call: call(taskID(0, 1), "archived"), reply: `["repair" "0" "a" "1" "1" "0" "60000" "task_archived" "wf"]`},
			{name: "repair: a stalled delivery of a later gen",
				seed: abc().pendingAt(2).step(2, "gen", "1", "task", taskID(2, 1)+"_g1"),
				call: call(taskID(2, 1)+"_g1", "stalled"), reply: `["repair" "2" "c" "1" "2" "0" "60000" "stalled_delivery" "wf"]`},
			{name: "attention: repaired too often", seed: abc().pendingAt(1).set("auto_recoveries", "3"),
				call: call(taskID(1, 1), "archived"), reply: `["attention" "repaired automatically 3 times (max_auto_recoveries 3); left for an operator (last: task_archived)"]`},
		},
	}.run(t)
}

// TestScriptRepairCheck: repair.lua's "check", the reconciler's pass: the
// script finds out itself whether the current step's task is in trouble
// (asynq's record of it, in the queue's slot) and repairs it, writing the
// task.
func TestScriptRepairCheck(t *testing.T) {
	const grace = 1000
	call := repairLua{runArgs: tr, Trouble: "check", MaxAuto: 3, Grace: grace}
	// task seeds asynq's record of a task in state.
	task := func(w *world, id, state string) *world { return w.do("HSET", taskKey(id), "msg", "m", "state", state) }
	retry := func() *world { return abc().retryAt(0, tNow+60_000) } // written at tAttempt+1, out of the grace
	luaTable{name: "repair_check", script: loadScripts().repair,
		cases: []luaCase{
			{name: "noop: run gone", seed: nothing().zadd(tk.scheduled(), tNow, tRun), call: call,
				reply: `["noop" "run gone"]`},
			{name: "noop: run failed", seed: abc().failedAt(1), call: call, reply: `["noop" "run failed"]`},
			{name: "noop: the run needs attention", seed: abc().pendingAt(1).set("needs_attention", "1"), call: call,
				reply: `["noop" "needs attention"]`},
			{name: "noop: a step without a task (waiting at a gate)", seed: abc().step(0, "task", ""), call: call,
				reply: `["noop" "no task"]`},
			{name: "noop: a live fence", seed: abc().runningAt(1, "tok"), call: call, reply: `["noop" "fence alive"]`},
			{name: "crashed: an expired fence", seed: abc().runningAt(1, "tok").step(1, "fence_expires_at", tNow),
				call: call, reply: `["crashed"]`},
			{name: "noop: a step neither pending nor waiting", seed: abc().pendingAt(1).step(1, "status", "succeeded"),
				call: call, reply: `["noop" "step succeeded"]`},
			{name: "recheck: written within the grace", seed: abc().pendingAt(1).set("updated_at", tNow-grace+1),
				call: call, reply: `["recheck" "1800000000001"]`},
			{name: "noop: the task is pending", seed: task(abc().pendingAt(1), taskID(1, 1), "pending"), call: call,
				reply: `["noop" "task pending"]`},
			{name: "noop: the retry's task is scheduled", seed: task(retry(), taskID(0, 2), "scheduled"), call: call,
				reply: `["noop" "task scheduled"]`},
			{name: "noop: the task is active", seed: task(abc().pendingAt(1), taskID(1, 1), "active"), call: call,
				reply: `["noop" "task active"]`},
			{name: "repair: a missing retry task, scheduled for its due time", seed: retry(), call: call,
				reply: `["repair" "0" "a" "2" "0" "1800000060000" "60000" "retry_task_missing" "wf"]`},
			{name: "repair: a missing retry task already due, pending", seed: abc().retryAt(0, tNow-1), call: call,
				reply: `["repair" "0" "a" "2" "0" "1799999999999" "60000" "retry_task_missing" "wf"]`},
			{name: "repair: a missing task of an idle run", seed: abc().pendingAt(1), call: call,
				reply: `["repair" "1" "b" "1" "0" "0" "60000" "task_missing" "wf"]`},
			{name: "repair: an archived task gets a new dispatch", seed: task(abc().pendingAt(1), taskID(1, 1), "archived"),
				call: call, reply: `["repair" "1" "b" "1" "1" "0" "60000" "task_archived" "wf"]`},
			{name: "repair: a waiting sleep's missing wake-up",
				seed: abc().sleeps(1, "sleep").waitingAt(1, "timer", tNow+5000), call: call,
				reply: `["repair" "1" "b" "1" "1" "1800000005000" "60000" "wake_task_missing" "wf"]`},
			{name: "attention: repaired too often", seed: retry().set("auto_recoveries", "3"), call: call,
				reply: `["attention" "repaired automatically 3 times (max_auto_recoveries 3); left for an operator (last: retry_task_missing)"]`},
		},
	}.run(t)
}

func TestScriptOperate(t *testing.T) {
	call := func(action, step string) operateLua {
		return operateLua{runArgs: tr, Action: action, StepName: step, Actor: "alice", Retention: tKeep}
	}
	stuck := func() *world { // running, needing attention, its attempt's fence expired
		return abc().runningAt(1, "old").step(1, "fence_expires_at", tNow-1).
			set("needs_attention", "1", "attention_reason", "repaired too often", "auto_recoveries", "4").
			zadd(tk.attention(), tAttempt, tRun)
	}
	luaTable{name: "operate", script: loadScripts().operate,
		cases: []luaCase{
			{name: "gone", seed: nothing(), call: call("recover", ""), reply: `["gone"]`},
			{name: "refused: a running run", seed: abc().runningAt(0, "tok"), call: call("recover", ""), reply: `["refused" "run is running; only a failed run or one needing attention can be recovered"]`},
			{name: "refused: a succeeded run", seed: abc().succeeded(), call: call("retry", "c"), reply: `["refused" "run is succeeded; only a failed run or one needing attention can be retried"]`},
			{name: "refused: a cancelled run", seed: abc().cancelledAt(1), call: call("skip", "b"), reply: `["refused" "run is cancelled; only a failed run or one needing attention can be skipped"]`},
			{name: "recover: a failed run", seed: abc().failedAt(1).idem(), call: call("recover", ""), reply: `["dispatch" "1" "b" "2" "60000" "wf"]`},
			{name: "recover: a run needing attention", seed: stuck(), call: call("recover", ""), reply: `["dispatch" "1" "b" "2" "60000" "wf"]`},
			{name: "retry: a step that failed while snoozed starts an attempt", seed: abc().failedAt(1).step(1, "resuming", "snoozed"),
				call: call("retry", "b"), reply: `["dispatch" "1" "b" "2" "60000" "wf"]`},
			{name: "refused: its attempt's fence is live", seed: stuck().step(1, "fence_expires_at", tNow+1),
				call: call("recover", ""), reply: `["refused" "step \"b\" is running"]`},
			{name: "recover: a run that never started",
				seed: abc().failedAt(0).set("started_at", "0").step(0, "started_at", "0"), call: call("recover", ""),
				reply: `["dispatch" "0" "a" "2" "60000" "wf"]`},
			{name: "recover: past its deadline",
				seed: abc().failedAt(1).set("run_timeout_ms", "60000", "deadline", tCreated+60000),
				call: call("recover", ""), reply: `["dispatch" "1" "b" "2" "60000" "wf"]`},
			{name: "retry: the step the run stopped at", seed: abc().failedAt(1), call: call("retry", "b"), reply: `["dispatch" "1" "b" "2" "60000" "wf"]`},
			{name: "refused: retry of another step", seed: abc().failedAt(1), call: call("retry", "a"), reply: `["refused" "step \"a\" is succeeded; only the step the run stopped at (\"b\") can be retried"]`},
			{name: "refused: retry of no step", seed: abc().failedAt(1), call: call("retry", "z"), reply: `["refused" "the run has no step \"z\""]`},
			{name: "refused: skip of a step that is not optional", seed: abc().failedAt(1), call: call("skip", "b"),
				reply: `["refused" "step \"b\" is not optional; only optional steps can be skipped"]`},
			{name: "skip: an optional step", seed: abc().failedAt(1).step(1, "optional", "1"), call: call("skip", "b"),
				reply: `["dispatch" "2" "c" "1" "60000" "wf"]`},
			{name: "skip: the last step", seed: abc().failedAt(2).step(2, "optional", "1").idem(),
				call: call("skip", "c"), reply: `["succeeded"]`},
			{name: "refused: every step succeeded",
				seed: abc().succeeded().set("status", "failed").move("succeeded", "failed"), call: call("recover", ""),
				reply: `["refused" "every step has already succeeded or been skipped"]`},
		},
	}.run(t)
}

func TestScriptRestore(t *testing.T) {
	call := func(from string) restoreLua {
		return restoreLua{runArgs: tr, Audit: tk.audit(), FromStep: from, Actor: "root", AuditMaxLen: 10000}
	}
	luaTable{name: "restore", script: loadScripts().restore,
		cases: []luaCase{
			{name: "gone", seed: nothing(), call: call("a"), reply: `["gone"]`},
			{name: "refused: a running run", seed: abc().runningAt(1, "tok"), call: call("a"), reply: `["refused" "run is running; only a finished run (succeeded, failed, cancelled or compensated) can be restored"]`},
			{name: "refused: no such step", seed: abc().succeeded(), call: call("z"), reply: `["refused" "the run has no step \"z\""]`},
			{name: "refused: an earlier step failed", seed: abc().failedAt(1), call: call("c"), reply: `["refused" "step \"b\" before \"c\" is failed; a run can only be restored from a step whose earlier steps all succeeded or were skipped"]`},
			{name: "restored: a succeeded run", seed: abc().succeeded(), call: call("b"), reply: `["dispatch" "1" "b" "2" "60000" "wf"]`},
			{name: "restored: a failed run, from its failed step", seed: abc().failedAt(1).idem(), call: call("b"),
				reply: `["dispatch" "1" "b" "2" "60000" "wf"]`},
			{name: "restored: past a skipped step",
				seed: abc().succeeded().step(1, "status", "skipped", "output", ""), call: call("c"), reply: `["dispatch" "2" "c" "2" "60000" "wf"]`},
			{name: "restored: a run cancelled before it started", seed: abc().cancelledAt(0), call: call("a"),
				reply: `["dispatch" "0" "a" "2" "60000" "wf"]`},
		},
	}.run(t)
}

func TestScriptPeek(t *testing.T) {
	call := peekLua{Run: runKey}
	luaTable{name: "peek", script: loadScripts().peek,
		cases: []luaCase{
			{name: "gone", seed: nothing(), call: call, reply: `[]`},
			{name: "fresh", seed: abc(), call: call, reply: `["pending" "0" "1799999400000" "0" "a" "pending" "1" "0" "R1_s0_a1" "0" "0" "60000"]`},
			{name: "running", seed: abc().runningAt(1, "tok"), call: call, reply: `["running" "0" "1799999995000" "1" "b" "running" "1" "0" "R1_s1_a1" "0" "1800000005000" "60000"]`},
			{name: "a scheduled retry of a later gen", seed: abc().retryAt(2, tNow+1000).step(2, "gen", "1"), call: call,
				reply: `["running" "0" "1799999995001" "2" "c" "pending" "2" "1" "R1_s2_a2" "1800000001000" "0" "60000"]`},
		},
	}.run(t)
}

func TestScriptUnlock(t *testing.T) {
	lock := tk.reconcileLock()
	held := func() *world { return nothing().do("SET", lock, "me", "PX", 30000) }
	call := func(token string, ttl int64) unlockLua { return unlockLua{Lock: lock, Token: token, TTL: ttl} }
	luaTable{name: "unlock", script: loadScripts().unlock,
		cases: []luaCase{
			{name: "extended", seed: held(), call: call("me", 60000), reply: `1`},
			{name: "released", seed: held(), call: call("me", 0), reply: `1`},
			{name: "held by another", seed: held(), call: call("you", 60000), reply: `0`},
			{name: "free", seed: nothing(), call: call("me", 0), reply: `0`},
		},
	}.run(t)
}

// snoozeCase is a snooze of step idx by token for delay ms, predicting the
// next visit's task next ("" for none).
//
//nolint:unparam // each case names the token it snoozes with, next to the fence it seeds
func snoozeCase(name string, seed *world, idx int, token string, delay int, next, reply string) luaCase {
	return luaCase{name: name, seed: seed, call: snoozeLua{runArgs: tr, NextTask: taskKey(next),
		Pending: tk.asynqPending(), Scheduled: tk.asynqScheduled(), Token: token, Index: idx, Delay: int64(delay),
		NextID: next, NextMsg: []byte("MSG"), Retention: tKeep}, reply: reply}
}

func TestScriptSnooze(t *testing.T) {
	luaTable{name: "snooze", script: loadScripts().snooze,
		cases: []luaCase{
			snoozeCase("snoozed: its task scheduled", abc().runningAt(0, "tok"), 0, "tok", 1500, taskID(0, 1)+"_g1",
				`["snoozed" "0" "a" "1" "1" "1800000001500" "60000" "1"]`),
			snoozeCase("snoozed: due now, its task pending", abc().runningAt(1, "tok"), 1, "tok", 0, taskID(1, 1)+"_g1",
				`["snoozed" "1" "b" "1" "1" "1800000000000" "60000" "1"]`),
			snoozeCase("snoozed: no task predicted", abc().runningAt(0, "tok"), 0, "tok", 1000, "",
				`["snoozed" "0" "a" "1" "1" "1800000001000" "60000" "0"]`),
			snoozeCase("snoozed: again, the next gen",
				abc().runningAt(0, "tok").step(0, "gen", "2", "task", taskID(0, 1)+"_g2", "snoozes", "2"), 0, "tok", 1000,
				taskID(0, 1)+"_g3", `["snoozed" "0" "a" "1" "3" "1800000001000" "60000" "1"]`),
			snoozeCase("failed: the visit would come after the deadline",
				abc().runningAt(0, "tok").set("run_timeout_ms", "60000", "deadline", tNow+1500).
					zadd(tk.deadlines(), tNow+1500, tRun),
				0, "tok", 1500, taskID(0, 1)+"_g1", `["failed" "run_timeout" "step \"a\" snoozed for 1500ms, past the run's deadline (run_timeout 60s)" ""]`),
			snoozeCase("fenced: run gone", nothing(), 0, "tok", 1000, "", `["fenced" "run gone"]`),
			snoozeCase("fenced: run cancelled", abc().cancelledAt(0), 0, "tok", 1000, "", `["fenced" "run cancelled"]`),
			snoozeCase("fenced: another delivery's fence", abc().runningAt(0, "other"), 0, "tok", 1000, "", `["fenced" "fence lost"]`),
			snoozeCase("done: applied before",
				abc().runningAt(0, "x").step(0, "status", "pending", "fence", "done:tok", "resuming", "snoozed"),
				0, "tok", 1000, "", `["done" "running"]`),
		},
	}.run(t)
}

// gotoCase is a goto from step idx by token to target, predicting the
// target's task next ("" for none).
//
//nolint:unparam // each case names the token it jumps with, next to the fence it seeds
func gotoCase(name string, seed *world, idx int, token, target, next, reply string) luaCase {
	return luaCase{name: name, seed: seed, call: gotoLua{runArgs: tr, NextTask: taskKey(next),
		Pending: tk.asynqPending(), Token: token, Index: idx, TargetName: target, NextID: next, NextMsg: []byte("MSG"),
		Retention: tKeep}, reply: reply}
}

func TestScriptGoto(t *testing.T) {
	luaTable{name: "goto", script: loadScripts().jump,
		cases: []luaCase{
			gotoCase("goto: an earlier step, its task written", abc().runningAt(2, "tok"), 2, "tok", "a", taskID(0, 2),
				`["goto" "0" "a" "2" "60000" "1"]`),
			gotoCase("goto: the step before, no task predicted", abc().runningAt(1, "tok"), 1, "tok", "a", "",
				`["goto" "0" "a" "2" "60000" "0"]`),
			gotoCase("goto: the same step", abc().runningAt(1, "tok"), 1, "tok", "b", taskID(1, 2),
				`["goto" "1" "b" "2" "60000" "1"]`),
			gotoCase("failed: a later step", abc().runningAt(0, "tok"), 0, "tok", "c", "",
				`["failed" "invalid_goto" "step \"a\": goto \"c\": no such step at or before it" ""]`),
			gotoCase("failed: an unknown step", abc().runningAt(1, "tok"), 1, "tok", "zz", "",
				`["failed" "invalid_goto" "step \"b\": goto \"zz\": no such step at or before it" ""]`),
			gotoCase("fenced: run gone", nothing(), 0, "tok", "a", "", `["fenced" "run gone"]`),
			gotoCase("fenced: another delivery's fence", abc().runningAt(1, "other"), 1, "tok", "a", "", `["fenced" "fence lost"]`),
			gotoCase("done: applied before", abc().runningAt(0, "new").step(1, "fence", "done:tok"), 1, "tok", "a", "",
				`["done" "running"]`),
		},
	}.run(t)
}
