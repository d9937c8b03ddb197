package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// BenchmarkLuaCosts measures, with callgrind, what the operations a Cairn
// script is made of cost Redis, each as a script of its own called
// CAIRN_BENCH_LUA_CALLS times (default 200): the script call itself, with
// and without a begin's ten arguments; Lua's own work (a string
// concatenation, a number formatted by string.format, a table insert, a
// closure); and the commands on a run hash of 98 fields (a 3-step run as
// create.lua copies it from its seed), once as Redis keeps such a hash
// today (a hash table: a step's policy is longer than a listpack's 64
// bytes) and once as a listpack (the same fields, every value short): an
// HMGET of 10 and of 78 fields, an HGETALL, an HSET of 10 fields, a COPY,
// and a DUMP and RESTORE. It prints the instructions of each per call, less
// the empty script's, and per unit where a snippet repeats one operation.
// The cost model behind the layout of the run record (docs/performance.md,
// "What a script's operations cost").
func BenchmarkLuaCosts(b *testing.B) {
	calls := envInt(b, "CAIRN_BENCH_LUA_CALLS", 200)
	cg := startCallgrind(b, "")
	rdb := cg.rdb
	ctx := context.Background()

	fields := []string{"status", "attempt", "budget_base", "retry_attempts", "retry_state", "next_attempt_at",
		"attempts_started", "crashes", "gen", "task", "fence", "fence_expires_at", "last_error", "last_error_class",
		"output", "started_at", "finished_at", "attempt_started_at", "name", "optional", "max_attempts", "max_crashes",
		"timeout_ms", "policy", "run_timeout_ms", "max_iterations"}
	hash := func(key string, policy string) {
		kv := make([]any, 0, 2*98)
		for i := range 3 {
			for _, f := range fields {
				v := "0"
				if f == "policy" {
					v = policy
				}
				kv = append(kv, fmt.Sprintf("s%d.%s", i, f), v)
			}
		}
		for i := range 20 {
			kv = append(kv, fmt.Sprintf("run%d", i), "0")
		}
		if err := rdb.HSet(ctx, key, kv...).Err(); err != nil {
			b.Fatal(err)
		}
	}
	hash("run:ht", strings.Repeat("p", 196)) // the size of the default policy's JSON
	hash("run:lp", "{}")
	for key, want := range map[string]string{"run:ht": "hashtable", "run:lp": "listpack"} {
		if enc, err := rdb.ObjectEncoding(ctx, key).Result(); err != nil || enc != want {
			b.Fatalf("%s: encoding %q, want %q (%v)", key, enc, want, err)
		}
	}
	names := "local N = {'" + strings.Join(fields, "', '") + "'}\n"
	build78 := names + "local f, n = {}, 0\nfor i = 0, 2 do\n  local p = 's' .. i .. '.'\n" +
		"  for j = 1, #N do\n    n = n + 1\n    f[n] = p .. N[j]\n  end -- j\nend\n"
	ten := "'s0.status', 's0.attempt', 's0.fence', 's0.task', 's1.name', 's1.attempt', 's1.timeout_ms', 'run1', 'run2', 'run3'"
	tenPairs := "'s0.status', '1', 's0.attempt', '1', 's0.fence', '1', 's0.task', '1', 's1.name', '1', " +
		"'s1.attempt', '1', 's1.timeout_ms', '1', 'run1', '1', 'run2', '1', 'run3', '1'"
	type snippet struct {
		label, src string
		units      int // operations the snippet repeats (0: one)
		args       bool
	}
	snippets := []snippet{
		{label: "call", src: "return 1"},
		{label: "call with 10 arguments", src: "return 1", args: true},
		{label: "concatenation", src: "local p, s = 's1.'\nfor i = 1, 100 do s = p .. 'status' end\nreturn 1", units: 100},
		{label: "field name from a number", src: "local s\nfor i = 1, 100 do s = 's' .. i .. '.status' end\nreturn 1", units: 100},
		{label: "string.format %d", src: "local s\nfor i = 1, 100 do s = string.format('%d', i) end\nreturn 1", units: 100},
		{label: "table insert t[#t+1]", src: "local t = {}\nfor i = 1, 100 do t[#t + 1] = 'x' end\nreturn 1", units: 100},
		{label: "table insert t[n]", src: "local t, n = {}, 0\nfor i = 1, 100 do n = n + 1\n t[n] = 'x' end\nreturn 1", units: 100},
		{label: "loop iteration", src: "local x = 0\nfor i = 1, 100 do x = x + i end\nreturn 1", units: 100},
		{label: "closure", src: strings.Repeat("local function f() return KEYS end\n", 30) + "return 1", units: 30},
		{label: "78 field names built", src: build78 + "return 1", units: 78},
		{label: "HMGET 10, hash table", src: "local v = redis.call('HMGET', KEYS[1], " + ten + ")\nreturn 1", units: 10},
		{label: "HMGET 10, listpack", src: "local v = redis.call('HMGET', KEYS[2], " + ten + ")\nreturn 1", units: 10},
		{label: "HMGET 78 built, hash table", src: build78 + "local v = redis.call('HMGET', KEYS[1], unpack(f))\nreturn 1", units: 78},
		{label: "HMGET 78 built, listpack", src: build78 + "local v = redis.call('HMGET', KEYS[2], unpack(f))\nreturn 1", units: 78},
		{label: "HGETALL 98, hash table", src: "local v = redis.call('HGETALL', KEYS[1])\nreturn 1", units: 98},
		{label: "HSET 10, hash table", src: "redis.call('HSET', KEYS[1], " + tenPairs + ")\nreturn 1", units: 10},
		{label: "HSET 10, listpack", src: "redis.call('HSET', KEYS[2], " + tenPairs + ")\nreturn 1", units: 10},
		{label: "COPY 98, hash table", src: "redis.call('COPY', KEYS[1], 'copy:ht', 'REPLACE')\nreturn 1"},
		{label: "COPY 98, listpack", src: "redis.call('COPY', KEYS[2], 'copy:lp', 'REPLACE')\nreturn 1"},
		{label: "DUMP and RESTORE 98, listpack", src: "local d = redis.call('DUMP', KEYS[2])\n" +
			"redis.call('RESTORE', 'copy:dump', 0, d, 'REPLACE')\nreturn 1"},
		{label: "XADD of 4 fields", src: "redis.call('XADD', 'j', 'MAXLEN', '~', '10000', '*', 'type', " +
			"'attempt_started', 'at', '1800000000000', 'step', 'a', 'attempt', '1')\nreturn 1"},
		{label: "ZADD", src: "redis.call('ZADD', 'z', '1800000000000', 'R1')\nreturn 1"},
	}
	args := []any{"x", "cairn:{q}:", "1800000000000", "x_s0_a1", "token", "10000", "0", "3600000", "0", "0"}
	keys := []string{"run:ht", "run:lp"}
	fmt.Printf("\nBenchmarkLuaCosts: instructions per script call (callgrind), %d calls each, less the empty call's\n", calls)
	var base float64
	for i, sn := range snippets {
		s := redis.NewScript(sn.src)
		if err := s.Load(ctx, rdb).Err(); err != nil {
			b.Fatal(sn.label, err)
		}
		var a []any
		if sn.args {
			a = args
		}
		// (callgrind_control takes a label that starts with a digit for
		// a process ID: the dumps are numbered.)
		n := cg.count(fmt.Sprintf("lua%02d", i), func() {
			for range calls {
				if err := s.EvalSha(ctx, rdb, keys, a...).Err(); err != nil {
					b.Fatal(sn.label, err)
				}
			}
		})
		per := float64(n) / float64(calls)
		if i == 0 {
			base = per
			fmt.Printf("  %-32s %9.0f\n", "an empty script's call", per)
			b.ReportMetric(per, "instr/call")
			continue
		}
		line := fmt.Sprintf("  %-32s %9.0f", sn.label, per-base)
		if sn.units > 0 {
			line += fmt.Sprintf("   %7.0f each of %d", (per-base)/float64(sn.units), sn.units)
		}
		fmt.Println(line)
	}
	b.ReportMetric(0, "ns/op")
}
