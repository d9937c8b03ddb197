package bench

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"
)

// BenchmarkJournalForms measures, with callgrind and MEMORY USAGE, what a
// run's journal would cost in each form issue 26 allows: a stream per run
// (today: XADD ... MAXLEN ~ 10000), a list per run (RPUSH of the entry
// encoded in Lua), a string per run (APPEND of a length-prefixed entry),
// and fields of the run's own hash (HINCRBY of a counter and HSET of the
// entry). Each form appends the entries of a 3-step run (8 entries: the
// run's start, each step's attempt_started and attempt_succeeded, the
// run's end), from a script per entry as the state scripts would, to
// CAIRN_BENCH_COST_RUNS keys (default 200). It prints, per form, the
// instructions of one append (the script call's own cost, an empty script
// with the same arguments, subtracted) and the bytes a finished run's
// journal takes (MEMORY USAGE, averaged; for the hash form, what the run
// hash grows by). A measurement for a design question (docs/performance.md).
func BenchmarkJournalForms(b *testing.B) {
	runs := envInt(b, "CAIRN_BENCH_COST_RUNS", 200)
	cg := startCallgrind(b, "")
	rdb := cg.rdb
	ctx := context.Background()

	// Every form gets the same arguments: the entry's fields, as journal()
	// passes them.
	entry := func(i int) []any {
		types := []string{"run_started", "attempt_started", "attempt_succeeded", "attempt_started",
			"attempt_succeeded", "attempt_started", "attempt_succeeded", "run_succeeded"}
		return []any{"type", types[i], "at", "1800000000123", "step", fmt.Sprintf("s%d", (i+1)/2),
			"attempt", "1", "task", fmt.Sprintf("01m8jhxacsmvhfrz16whq8gjwt_s%d_a1", (i+1)/2)}
	}
	const encode = `
local parts = {}
for i = 1, #ARGV do
  parts[i] = ARGV[i]
end
local e = table.concat(parts, "\31")
`
	forms := []struct {
		name   string
		script *redis.Script
	}{
		{"empty", redis.NewScript(`return 1`)},
		{"stream", redis.NewScript(`return redis.call("XADD", KEYS[1], "MAXLEN", "~", "10000", "*", unpack(ARGV))`)},
		{"list", redis.NewScript(encode + `return redis.call("RPUSH", KEYS[1], e)`)},
		{"string", redis.NewScript(encode + `return redis.call("APPEND", KEYS[1], string.format("%d:", #e) .. e)`)},
		{"hash", redis.NewScript(encode + `local n = redis.call("HINCRBY", KEYS[2], "jn", 1)
return redis.call("HSET", KEYS[2], "j" .. n, e)`)},
	}
	var empty float64
	fmt.Printf("\nBenchmarkJournalForms: a run's journal of 8 entries, %d runs a form (callgrind, MEMORY USAGE)\n", runs)
	for _, f := range forms {
		if err := f.script.Load(ctx, rdb).Err(); err != nil {
			b.Fatal(err)
		}
		key := func(r int) []string {
			return []string{fmt.Sprintf("cairn:{q}:run:%s%d:j", f.name, r), fmt.Sprintf("cairn:{q}:run:%s%d", f.name, r)}
		}
		// A run hash as a finished run keeps it (compact: a handful of
		// short fields), for the hash form to grow.
		for r := range runs {
			if err := rdb.HSet(ctx, key(r)[1], "workflow", "noop", "status", "succeeded", "def", "0123456789abcdef",
				"created_at", "1800000000000", "finished_at", "1800000000456").Err(); err != nil {
				b.Fatal(err)
			}
		}
		before := 0.0
		if f.name == "hash" {
			before = meanMemory(b, rdb, runs, func(r int) string { return key(r)[1] })
		}
		n := cg.count("journal "+f.name, func() {
			for i := range 8 {
				for r := range runs {
					if err := f.script.EvalSha(ctx, rdb, key(r), entry(i)...).Err(); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
		per := float64(n) / float64(8*runs)
		if f.name == "empty" {
			empty = per
			fmt.Printf("  %-7s %8.0f instructions a call (the script call itself)\n", f.name, per)
			continue
		}
		var bytes float64
		if f.name == "hash" {
			bytes = meanMemory(b, rdb, runs, func(r int) string { return key(r)[1] }) - before
		} else {
			bytes = meanMemory(b, rdb, runs, func(r int) string { return key(r)[0] })
		}
		fmt.Printf("  %-7s %8.0f instructions an append   %6.0f bytes a run's journal\n", f.name, per-empty, bytes)
		b.ReportMetric(per-empty, "instr/append-"+f.name)
		b.ReportMetric(bytes, "bytes/journal-"+f.name)
	}
	b.ReportMetric(0, "ns/op")
}

// meanMemory is the mean MEMORY USAGE of the keys key(0..n-1).
func meanMemory(b *testing.B, rdb *redis.Client, n int, key func(int) string) float64 {
	b.Helper()
	var sum int64
	for r := range n {
		m, err := rdb.MemoryUsage(context.Background(), key(r)).Result()
		if err != nil {
			b.Fatal(err)
		}
		sum += m
	}
	return float64(sum) / float64(n)
}
