package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/tasks"
)

// floorBegin and floorComplete are not Cairn's scripts: they are the least
// a durable step checkpoint could do on Cairn's run hash, the reference
// BenchmarkScriptFloor measures. A begin checks the step's task and takes
// its fence (three fields, the fence index, one journal entry); a complete
// checks the fence, checkpoints the output and makes the next step current
// with its asynq task written (as complete.lua does), with one journal
// entry. Nothing else: no attempt or iteration counting, deadline, retry
// state, breaker, crash or lost-reply handling, status or activity index,
// notification or compaction.
// KEYS: run hash, fence index, the next task's key, asynq's pending list.
// ARGV: run ID, now (ms), step index, task ID (begin) or the next task's ID
// and message (complete), fence token.
const (
	floorBegin = `
local p = "s" .. ARGV[3] .. "."
local v = redis.call("HMGET", KEYS[1], "status", p .. "task", p .. "attempt", p .. "name", "input")
if not v[1] or v[2] ~= ARGV[4] then
  return {"stale"}
end
local exp = tostring(tonumber(ARGV[2]) + 60000)
redis.call("HSET", KEYS[1], p .. "status", "running", p .. "fence", ARGV[5], p .. "fence_expires_at", exp)
redis.call("ZADD", KEYS[2], exp, ARGV[1])
redis.call("XADD", KEYS[1] .. ":j", "MAXLEN", "~", "10000", "*", "type", "attempt_started", "at", ARGV[2],
  "step", v[4], "attempt", v[3])
return {"ok", v[3], v[5]}
`
	floorComplete = `
local i = tonumber(ARGV[3])
local p, q = "s" .. ARGV[3] .. ".", "s" .. (i + 1) .. "."
local v = redis.call("HMGET", KEYS[1], p .. "fence", p .. "name", q .. "name")
if v[1] ~= ARGV[6] then
  return {"fenced"}
end
redis.call("HSET", KEYS[1], p .. "status", "succeeded", p .. "output", "null", p .. "fence", "done",
  "current", tostring(i + 1), q .. "status", "pending", q .. "task", ARGV[4])
redis.call("ZREM", KEYS[2], ARGV[1])
redis.call("XADD", KEYS[1] .. ":j", "MAXLEN", "~", "10000", "*", "type", "attempt_succeeded", "at", ARGV[2],
  "step", v[2])
redis.call("HSET", KEYS[3], "msg", ARGV[5], "state", "pending", "pending_since", ARGV[2] .. "000000")
redis.call("LPUSH", KEYS[4], ARGV[4])
return {"next", v[3]}
`
)

// BenchmarkScriptFloor measures, as BenchmarkScriptInstructions does (under
// callgrind, CAIRN_BENCH_COST_RUNS runs), the stripped-down begin and
// complete above on runs Client.Start created (Cairn's run hash, indexes
// and first task): what a step's checkpoint would cost Redis if it did
// nothing but take the fence and checkpoint, the floor under begin.lua and
// complete.lua. docs/performance.md sets it against the throughput targets.
func BenchmarkScriptFloor(b *testing.B) {
	runs := envInt(b, "CAIRN_BENCH_COST_RUNS", 200)
	cg := startCallgrind(b, "")
	rdb := cg.rdb
	ctx := context.Background()
	const queue = "floor"
	client := publishNoop(b, rdb, queue)
	ids := make([]string, runs+1)
	for i := range ids {
		r, err := client.Start(ctx, workflowName, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = r.ID
	}
	begin, complete := redis.NewScript(floorBegin), redis.NewScript(floorComplete)
	prefix := "cairn:{" + queue + "}:"
	fences, pending := prefix+"idx:fences", tasks.QueueKeys(queue).Pending()
	var total int64
	measure := func(label string, fn func()) {
		n := cg.count(label, fn) / int64(runs)
		fmt.Printf("  %-12s %9d\n", label, n)
		total += n
	}
	step := func(ids []string, idx int, measure func(string, func())) {
		measure(fmt.Sprintf("begin s%d", idx+1), func() {
			for _, id := range ids {
				err := begin.Run(ctx, rdb, []string{prefix + "run:" + id, fences}, id, time.Now().UnixMilli(), idx,
					tasks.ID(id, idx, 1, 0), "token").Err()
				if err != nil {
					b.Fatal(err)
				}
			}
		})
		measure(fmt.Sprintf("complete s%d", idx+1), func() {
			for _, id := range ids {
				next := tasks.Step{RunID: id, Workflow: workflowName, Index: idx + 1, Name: "s", Attempt: 1}
				err := complete.Run(ctx, rdb, []string{prefix + "run:" + id, fences, tasks.QueueKeys(queue).Task(next.ID()),
					pending}, id, time.Now().UnixMilli(), idx, next.ID(), next.AsynqMessage(queue, time.Minute), "token").Err()
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	for idx := range stepsPerChain - 1 {
		step(ids[:1], idx, func(_ string, fn func()) { fn() })
	}
	fmt.Printf("\n%s: instructions redis-server executes per call of a stripped-down begin and complete (callgrind), %d runs\n",
		b.Name(), runs)
	for idx := range stepsPerChain - 1 {
		step(ids[1:], idx, measure)
	}
	pair := total / (stepsPerChain - 1)
	fmt.Printf("  %-12s %9d\n", "per step", pair)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(pair), "instr/floor-step")
}
