package bench

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/tasks"
)

// The lean floor: what issue 26's data format 2 could cost at best. These
// are not Cairn's scripts, nor a design of its own: they are the least a
// durable step could do with every allowed design of issue 26 at once, so
// that docs/performance.md can set the targets against a lower bound
// rather than against today's scripts:
//
//   - a run record that holds only what changes (status, current step, the
//     fence and its expiry, each step's attempt counter and output; names
//     and policies are the worker's, from its registered definition);
//   - the journal as a list of compact entries ("type|at|step|attempt"),
//     so that nothing is moved or compacted when the run ends;
//   - Cairn's own dequeue with the begin in the same script (asynq's
//     dequeue, then the fence), and the checkpoint that acknowledges its
//     task (asynq's done) and writes the next step's task (asynq's
//     enqueue);
//   - the status index touched when the run's status changes only; no
//     fence index (the asynq lease of the task recovers a killed worker's
//     step).
//
// Nothing else: no deadline, retry state, breaker, iteration or crash
// budget, lost-reply handling, ordering key, notification, worker
// identity or trace. Whatever a real script spends beyond these is the
// price of those features.
const (
	// KEYS: the run. ARGV: asynq's key prefix (asynq:{q}:), Cairn's
	// (cairn:{q}:), run ID, now (ms), workflow, input, step 0's task ID and
	// message.
	leanCreate = `
local run = unpack(KEYS)
local aq, cq, id, now, wf, input, tid, msg = unpack(ARGV)
if redis.call("EXISTS", run) == 1 then
  return {"exists"}
end
redis.call("HSET", run, "wf", wf, "st", "running", "cur", "0", "in", input, "at", now)
redis.call("RPUSH", run .. ":jl", "c|" .. now)
redis.call("ZADD", cq .. "idx:running", now, id)
redis.call("HSET", aq .. "t:" .. tid, "msg", msg, "state", "pending", "pending_since", now .. "000000")
redis.call("LPUSH", aq .. "pending", tid)
return {"ok"}
`
	// KEYS: pending, paused, active, lease. ARGV: the task prefix
	// (asynq:{q}:t:), the lease's expiry (Unix s), the run prefix
	// (cairn:{q}:run:), now (ms), the fence token and its TTL (ms).
	leanTakeBegin = `
local pending, paused, active, lease = unpack(KEYS)
local tp, expiry, rp, now, token, ttl = unpack(ARGV)
if redis.call("EXISTS", paused) == 1 then
  return {"paused"}
end
local id = redis.call("RPOP", pending)
if not id then
  return {"empty"}
end
local task = tp .. id
local msg = redis.call("HGET", task, "msg")
if not msg then
  return {"missing"}
end
redis.call("LPUSH", active, id)
redis.call("HSET", task, "state", "active")
redis.call("HDEL", task, "pending_since")
redis.call("ZADD", lease, expiry, id)
local rid, i = string.match(id, "^(.-)_s(%d+)_a")
local run = rp .. rid
local v = redis.call("HMGET", run, "st", "cur", "a" .. i, "f", "fx", "in")
if v[1] ~= "running" or v[2] ~= i then
  return {"stale", msg}
end
if v[4] and v[4] ~= "" and v[4] ~= token and tonumber(v[5]) > tonumber(now) then
  return {"busy", msg}
end
local att = (tonumber(v[3]) or 0) + 1
redis.call("HSET", run, "a" .. i, att, "f", token, "fx", tonumber(now) + tonumber(ttl))
redis.call("RPUSH", run .. ":jl", "b|" .. now .. "|" .. i .. "|" .. att)
return {"ok", msg, att, v[6]}
`
	// KEYS: the run. ARGV: asynq's key prefix (asynq:{q}:), Cairn's
	// (cairn:{q}:), the task ID, now (ms), the step index, the fence
	// token, the output, the day (2006-01-02) and its counter's expiry
	// (Unix s), the next step's task ID and message ("" when the step is
	// the last), the retention (ms), the run ID; with inline "1", the next
	// step begins in this call under the same token (no task written,
	// nothing acknowledged). Every other key is derived from the prefixes,
	// in the slot of the queue's hash tag, as Cairn's scripts derive their
	// journal and indexes.
	leanComplete = `
local run = unpack(KEYS)
local aq, cq, id, now, i, token, output, day, stats_expiry, next_id, next_msg, retention, rid, inline = unpack(ARGV)
local v = redis.call("HMGET", run, "f", "cur", "st")
if v[1] ~= token or v[2] ~= i or v[3] ~= "running" then
  return {"fenced"}
end
local jl = run .. ":jl"
local n = tonumber(i) + 1
if next_id ~= "" and inline == "1" then
  local att = (tonumber(redis.call("HGET", run, "a" .. n)) or 0) + 1
  redis.call("HSET", run, "o" .. i, output, "cur", n, "a" .. n, att)
  redis.call("RPUSH", jl, "s|" .. now .. "|" .. i, "b|" .. now .. "|" .. n .. "|" .. att)
  return {"inline", att}
end
if next_id ~= "" then
  redis.call("HSET", run, "o" .. i, output, "cur", n, "f", "")
  redis.call("RPUSH", jl, "s|" .. now .. "|" .. i)
  redis.call("HSET", aq .. "t:" .. next_id, "msg", next_msg, "state", "pending", "pending_since", now .. "000000")
  redis.call("LPUSH", aq .. "pending", next_id)
else
  redis.call("HSET", run, "o" .. i, output, "st", "succeeded", "f", "")
  redis.call("RPUSH", jl, "s|" .. now .. "|" .. i, "e|" .. now)
  redis.call("ZREM", cq .. "idx:running", rid)
  redis.call("ZADD", cq .. "idx:succeeded", tonumber(now) + tonumber(retention), rid)
  redis.call("PEXPIRE", run, retention)
  redis.call("PEXPIRE", jl, retention)
end
redis.call("LREM", aq .. "active", 0, id)
redis.call("ZREM", aq .. "lease", id)
redis.call("DEL", aq .. "t:" .. id)
local d = aq .. "processed:" .. day
if redis.call("INCR", d) == 1 then
  redis.call("EXPIREAT", d, stats_expiry)
end
redis.call("INCR", aq .. "processed")
return {"acked"}
`
)

// leanMany makes a script that runs body (a script of the lean floor) once
// for each block of its arguments, in one call: group commit across runs,
// which issue 26 allows (a queue's keys share one hash slot). ARGV[1] is
// the number of keys of a block (0: every block gets all of KEYS), ARGV[2]
// the number of arguments; the reply is the blocks' replies.
func leanMany(body string) string {
	return `local function one(KEYS, ARGV)` + body + `end
local k, a = tonumber(ARGV[1]), tonumber(ARGV[2])
local out = {}
for at = 0, (#ARGV - 2) / a - 1 do
  local keys = KEYS
  if k > 0 then
    keys = {unpack(KEYS, at * k + 1, at * k + k)}
  end
  out[#out + 1] = one(keys, {unpack(ARGV, 3 + at * a, 2 + at * a + a)})
end
return out
`
}

// BenchmarkScriptLeanFloor measures, as BenchmarkScriptInstructions does
// (callgrind, CAIRN_BENCH_COST_RUNS runs of 3 steps each), the lean floor
// above: a create, a strict step (take and begin; complete, acknowledge
// and write the next task) and an inline step (the run's one task taken
// and begun; each complete begins the next step; the last acknowledges).
// docs/performance.md sets issue 26's targets against it.
func BenchmarkScriptLeanFloor(b *testing.B) {
	runs := envInt(b, "CAIRN_BENCH_COST_RUNS", 200)
	cg := startCallgrind(b, "")
	rdb := cg.rdb
	ctx := context.Background()
	// call runs script once (batch 1) or, grouped, once for blocks of
	// keys (k of them each; 0: shared) and arguments.
	type block struct {
		keys []string
		args []any
	}
	// replies are the blocks' replies, each a list whose first element
	// is its word.
	replies := func(vs []any) [][]any {
		out := make([][]any, len(vs))
		for i, v := range vs {
			r, ok := v.([]any)
			if !ok || len(r) == 0 {
				b.Fatalf("reply %d: %v", i, v)
			}
			out[i] = r
		}
		return out
	}
	// loaded holds each script built once (its SHA1 computed once), alone
	// and grouped (leanMany).
	loaded := map[string]*redis.Script{}
	load := func(src string) *redis.Script {
		if loaded[src] == nil {
			loaded[src] = redis.NewScript(src)
		}
		return loaded[src]
	}
	call := func(script string, k int, blocks []block) [][]any {
		if len(blocks) == 1 {
			v, err := load(script).Run(ctx, rdb, blocks[0].keys, blocks[0].args...).Slice()
			if err != nil {
				b.Fatal(err)
			}
			return replies([]any{v})
		}
		var keys []string
		args := []any{k, len(blocks[0].args)}
		for i, bl := range blocks {
			if k > 0 || i == 0 {
				keys = append(keys, bl.keys...)
			}
			args = append(args, bl.args...)
		}
		v, err := load(leanMany(script)).Run(ctx, rdb, keys, args...).Slice()
		if err != nil {
			b.Fatal(err)
		}
		return replies(v)
	}
	var bytesPerRun int64
	fmt.Printf("\n%s: instructions redis-server executes per call of the lean floor (callgrind), %d runs\n",
		b.Name(), runs)
	// variant runs the runs through their 3 steps, batch of them at a time
	// (in one script call each: group commit across runs when batch > 1),
	// and returns the instructions per create and per step.
	variant := func(queue string, inline bool, batch int) (createInstr, stepInstr int64) {
		q := tasks.QueueKeys(queue)
		aq, cq := "asynq:{"+queue+"}:", "cairn:{"+queue+"}:"
		ids := make([]string, runs)
		for r := range ids {
			ids[r] = fmt.Sprintf("%026d", r) // as long as a ULID
		}
		createInstr = cg.count(queue+" create", func() {
			for at := 0; at < runs; at += batch {
				var bl []block
				for _, id := range ids[at:min(at+batch, runs)] {
					s := tasks.Step{RunID: id, Workflow: workflowName, Index: 0, Name: "s", Attempt: 1}
					bl = append(bl, block{[]string{cq + "run:" + id}, []any{aq, cq, id, time.Now().UnixMilli(),
						workflowName, "{}", s.ID(), s.AsynqMessage(queue, time.Minute)}})
				}
				for _, r := range call(leanCreate, 1, bl) {
					if r[0] != "ok" {
						b.Fatalf("create: %v", r)
					}
				}
			}
		}) / int64(runs)
		// runTasks takes the n oldest pending tasks and runs their steps,
		// and inline the steps after them.
		runTasks := func(n int) {
			now := time.Now()
			const token = "tok"
			take := make([]block, n)
			for i := range take {
				take[i] = block{[]string{q.Pending(), q.Paused(), q.Active(), q.Lease()},
					[]any{q.Task(""), now.Add(30 * time.Second).Unix(), cq + "run:", now.UnixMilli(), token, 10000}}
			}
			type running struct {
				m   *tasks.Message
				p   tasks.Step
				idx int
			}
			var live []running
			for _, v := range call(leanTakeBegin, 0, take) {
				if v[0] != "ok" || len(v) < 2 {
					b.Fatalf("take and begin: %v", v)
				}
				msg, ok := v[1].(string)
				if !ok {
					b.Fatalf("take and begin: %v", v)
				}
				m, err := tasks.ParseMessage([]byte(msg))
				if err != nil {
					b.Fatal(err)
				}
				p, err := tasks.Decode(m.Payload)
				if err != nil {
					b.Fatal(err)
				}
				live = append(live, running{m, p, p.Index})
			}
			for len(live) > 0 {
				now := time.Now()
				bl := make([]block, len(live))
				for i, l := range live {
					nextID, nextMsg := "", ""
					if l.idx+1 < stepsPerChain {
						s := tasks.Step{RunID: l.p.RunID, Workflow: workflowName, Index: l.idx + 1, Name: "s", Attempt: 1}
						nextID, nextMsg = s.ID(), string(s.AsynqMessage(queue, time.Minute))
					}
					inl := "0"
					if inline && nextID != "" {
						inl = "1"
					}
					bl[i] = block{[]string{cq + "run:" + l.p.RunID}, []any{aq, cq, l.m.ID, now.UnixMilli(),
						strconv.Itoa(l.idx), token, "null", now.UTC().Format(time.DateOnly), now.Add(24 * time.Hour).Unix(),
						nextID, nextMsg, 3600000, l.p.RunID, inl}}
				}
				var still []running
				for i, r := range call(leanComplete, 1, bl) {
					switch r[0] {
					case "inline":
						live[i].idx++
						still = append(still, live[i])
					case "acked":
					default:
						b.Fatalf("complete %s step %d: %v", live[i].p.RunID, live[i].idx, r)
					}
				}
				live = still
			}
		}
		tasksPerRun := stepsPerChain
		if inline {
			tasksPerRun = 1
		}
		stepInstr = cg.count(queue+" steps", func() {
			for left := runs * tasksPerRun; left > 0; left -= batch {
				runTasks(min(batch, left))
			}
		}) / int64(runs*stepsPerChain)
		if n, err := rdb.LLen(ctx, q.Pending()).Result(); err != nil || n != 0 {
			b.Fatalf("%d tasks left pending (%v)", n, err)
		}
		if n, err := rdb.ZCard(ctx, cq+"idx:succeeded").Result(); err != nil || n != int64(runs) {
			b.Fatalf("%d runs succeeded of %d (%v)", n, runs, err)
		}
		if !inline && batch == 1 {
			bytesPerRun = leanBytes(b, rdb, queue, runs)
		}
		// As BenchmarkScriptInstructions counts a step (and the targets
		// do): its share of the run's create included, as a raw asynq
		// task's figure includes its enqueue.
		return createInstr, stepInstr + createInstr/stepsPerChain
	}
	fmt.Printf("  %-34s %9s %12s %12s\n", "", "create", "strict step", "inline step")
	for _, batch := range []int{1, 10} {
		c1, strict := variant(fmt.Sprintf("leanstrict%d", batch), false, batch)
		_, inline := variant(fmt.Sprintf("leaninline%d", batch), true, batch)
		label := "one run a call"
		if batch > 1 {
			label = fmt.Sprintf("%d runs a call (group commit)", batch)
		}
		fmt.Printf("  %-34s %9d %12d %12d\n", label, c1, strict, inline)
		if batch == 1 {
			b.ReportMetric(float64(c1), "instr/lean-create")
			b.ReportMetric(float64(strict), "instr/lean-strict-step")
			b.ReportMetric(float64(inline), "instr/lean-inline-step")
		} else {
			b.ReportMetric(float64(c1), "instr/lean-create-grouped")
			b.ReportMetric(float64(strict), "instr/lean-strict-step-grouped")
			b.ReportMetric(float64(inline), "instr/lean-inline-step-grouped")
		}
	}
	fmt.Println("  (a step: its share of the create included, with its task's dequeue and done)")
	fmt.Printf("  a finished 3-step run keeps %d bytes (every key of the queue, MEMORY USAGE, per run)\n", bytesPerRun)
	b.ReportMetric(float64(bytesPerRun), "bytes/lean-run")
	b.ReportMetric(0, "ns/op")
}

// leanBytes is the memory of every key of queue (cairn:{q}:* and
// asynq:{q}:*, MEMORY USAGE SAMPLES 0) divided by its runs, all finished.
func leanBytes(b *testing.B, rdb *redis.Client, queue string, runs int) int64 {
	b.Helper()
	ctx := context.Background()
	var total int64
	for _, pattern := range []string{"cairn:{" + queue + "}:*", "asynq:{" + queue + "}:*"} {
		iter := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			n, err := rdb.MemoryUsage(ctx, iter.Val(), 0).Result()
			if err != nil {
				b.Fatal(err)
			}
			total += n
		}
		if err := iter.Err(); err != nil {
			b.Fatal(err)
		}
	}
	return total / int64(runs)
}
