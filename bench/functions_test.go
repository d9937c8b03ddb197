package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// BenchmarkFunctionCall measures, with callgrind, what Redis 7's functions
// (FUNCTION LOAD, FCALL) would save the step path against scripts
// (EVALSHA), which Cairn runs today: the fixed cost of a call (an empty
// body, with a begin's key and arguments), and the cost of a script's
// helpers, which a script creates anew as closures on every call and a
// library creates once, when it is loaded (helpers local functions, each
// capturing one upvalue, as retrystate's do). It prints the instructions
// per call of each and reports instr/evalsha-empty, instr/fcall-empty,
// instr/evalsha-helpers and instr/fcall-helpers. A measurement for a design
// question (docs/performance.md); Cairn's scripts are not functions.
func BenchmarkFunctionCall(b *testing.B) {
	const calls, helpers = 200, 20
	cg := startCallgrind(b, "")
	rdb := cg.rdb
	ctx := context.Background()

	// helperSrc defines n local helper functions, each using a local of
	// the code around it (as retrystate's helpers use RUN, PREFIX, ...).
	helperSrc := func(n int) string {
		var sb strings.Builder
		sb.WriteString("local RUN = 'run:x'\n")
		for i := range n {
			fmt.Fprintf(&sb, "local function h%d(a, b)\n  if a == b then\n    return RUN .. a\n  end\n  return b\nend\n", i)
		}
		return sb.String()
	}
	body := "local RUN_KEY = unpack(KEYS)\nlocal a, b, c = unpack(ARGV, 1, 3)\nreturn 1\n"
	empty := redis.NewScript(body)
	withHelpers := redis.NewScript(helperSrc(helpers) + body)
	lib := "#!lua name=cairnprobe\n" + helperSrc(helpers) +
		"redis.register_function('probe_empty', function(KEYS, ARGV)\n" + body + "end)\n" +
		"redis.register_function('probe_helpers', function(KEYS, ARGV)\n  local _ = h0\n" + body + "end)\n"
	if err := rdb.FunctionLoadReplace(ctx, lib).Err(); err != nil {
		b.Fatal(err)
	}
	keys := []string{"cairn:{q}:run:x"}
	args := []any{"x", "cairn:{q}:", "1800000000000", "x_s0_a1", "token", "10000", "0", "3600000", "0"}
	for _, s := range []*redis.Script{empty, withHelpers} {
		if err := s.Load(ctx, rdb).Err(); err != nil {
			b.Fatal(err)
		}
	}
	per := func(label string, fn func() error) float64 {
		n := cg.count(label, func() {
			for range calls {
				if err := fn(); err != nil {
					b.Fatal(err)
				}
			}
		})
		return float64(n) / calls
	}
	evalEmpty := per("evalsha empty", func() error { return empty.EvalSha(ctx, rdb, keys, args...).Err() })
	fcallEmpty := per("fcall empty", func() error { return rdb.FCall(ctx, "probe_empty", keys, args...).Err() })
	evalHelpers := per("evalsha helpers", func() error { return withHelpers.EvalSha(ctx, rdb, keys, args...).Err() })
	fcallHelpers := per("fcall helpers", func() error { return rdb.FCall(ctx, "probe_helpers", keys, args...).Err() })
	fmt.Printf("\nBenchmarkFunctionCall: instructions per call, %d calls each (callgrind)\n", calls)
	fmt.Printf("  empty body:         EVALSHA %8.0f  FCALL %8.0f\n", evalEmpty, fcallEmpty)
	fmt.Printf("  with %d helpers:    EVALSHA %8.0f  FCALL %8.0f  (the helpers: %.0f a call in a script)\n", helpers,
		evalHelpers, fcallHelpers, evalHelpers-evalEmpty)
	b.ReportMetric(evalEmpty, "instr/evalsha-empty")
	b.ReportMetric(fcallEmpty, "instr/fcall-empty")
	b.ReportMetric(evalHelpers, "instr/evalsha-helpers")
	b.ReportMetric(fcallHelpers, "instr/fcall-helpers")
	b.ReportMetric(0, "ns/op")
}
