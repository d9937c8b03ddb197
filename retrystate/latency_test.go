package retrystate_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/retrystate"
)

// TestLatencyBuckets: the buckets' bounds are fixed (four an octave of
// milliseconds), every duration falls in the bucket whose bounds hold it,
// and the bounds themselves fall on the right side.
func TestLatencyBuckets(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		d      time.Duration
		bucket int
		lo, hi time.Duration
	}{
		{-time.Second, 0, 0, time.Millisecond},
		{0, 0, 0, time.Millisecond},
		{999 * time.Microsecond, 0, 0, time.Millisecond},
		{time.Millisecond, 1, time.Millisecond, 1189207 * time.Nanosecond},
		{1189207 * time.Nanosecond, 2, 1189207 * time.Nanosecond, 1414214 * time.Nanosecond},
		{2 * time.Millisecond, 5, 2 * time.Millisecond, 2378414 * time.Nanosecond},
		{3 * time.Millisecond, 7, 2828427 * time.Nanosecond, 3363586 * time.Nanosecond},
		{100 * time.Millisecond, 27, 90509668 * time.Nanosecond, 107634741 * time.Nanosecond},
		{time.Second, 40, 861077929 * time.Nanosecond, 1024 * time.Millisecond},
		{1024 * time.Millisecond, 41, 1024 * time.Millisecond, 1217748086 * time.Nanosecond},
		{time.Hour, 88, 3526975198084 * time.Nanosecond, 4194304 * time.Millisecond},
		// 2^30 ms and beyond: the last bucket, open above.
		{1 << 30 * time.Millisecond, retrystate.LatencyBuckets - 1, 1 << 30 * time.Millisecond, 1 << 30 * time.Millisecond},
		{30 * 24 * time.Hour, retrystate.LatencyBuckets - 1, 1 << 30 * time.Millisecond, 1 << 30 * time.Millisecond},
	} {
		b := retrystate.LatencyBucket(c.d)
		lo, hi := retrystate.LatencyBucketLow(b), retrystate.LatencyBucketHigh(b)
		if b != c.bucket || lo != c.lo || hi != c.hi {
			t.Errorf("%s: bucket %d [%s, %s), want %d [%s, %s)", c.d, b, lo, hi, c.bucket, c.lo, c.hi)
		}
	}
	if retrystate.LatencyBuckets != 122 {
		t.Errorf("%d buckets, want 122", retrystate.LatencyBuckets)
	}
	for i := 1; i < retrystate.LatencyBuckets; i++ {
		lo := retrystate.LatencyBucketLow(i)
		if prev := retrystate.LatencyBucketLow(i - 1); lo <= prev {
			t.Fatalf("bucket %d starts at %s, not after bucket %d's %s", i, lo, i-1, prev)
		}
		if got := retrystate.LatencyBucket(lo); got != i {
			t.Errorf("%s (bucket %d's lower bound) falls in bucket %d", lo, i, got)
		}
		if got := retrystate.LatencyBucket(lo - 1); got != i-1 {
			t.Errorf("%s (just below bucket %d) falls in bucket %d", lo-1, i, got)
		}
		if i < retrystate.LatencyBuckets-1 {
			// Each bucket is 2^(1/4) times as wide as the one before.
			ratio := float64(retrystate.LatencyBucketHigh(i)) / float64(lo)
			if i > 1 && (ratio < 1.189 || ratio > 1.1893) {
				t.Errorf("bucket %d: high/low %.5f, want 2^(1/4)", i, ratio)
			}
		}
	}
}

// TestLatencyQuantile: the percentiles of known distributions are the
// upper bounds of the buckets that hold them.
func TestLatencyQuantile(t *testing.T) {
	t.Parallel()
	high := func(d time.Duration) time.Duration { return retrystate.LatencyBucketHigh(retrystate.LatencyBucket(d)) }
	type obs struct {
		d time.Duration
		n int64
	}
	for _, c := range []struct {
		name          string
		obs           []obs
		p50, p90, p99 time.Duration
		total         int64
	}{
		{name: "none"},
		{name: "one", obs: []obs{{250 * time.Millisecond, 1}}, total: 1,
			p50: high(250 * time.Millisecond), p90: high(250 * time.Millisecond), p99: high(250 * time.Millisecond)},
		// 9 fast, 1 slow: the 90th is the 9th (fast), the 99th the 10th.
		{name: "tail", obs: []obs{{100 * time.Millisecond, 9}, {5 * time.Second, 1}}, total: 10,
			p50: high(100 * time.Millisecond), p90: high(100 * time.Millisecond), p99: high(5 * time.Second)},
		// 1..100 ms, one each: the 50th is 50 ms, the 90th 90 ms, the 99th 99 ms.
		{name: "uniform", obs: func() []obs {
			var o []obs
			for i := 1; i <= 100; i++ {
				o = append(o, obs{time.Duration(i) * time.Millisecond, 1})
			}
			return o
		}(), total: 100, p50: high(50 * time.Millisecond), p90: high(90 * time.Millisecond), p99: high(99 * time.Millisecond)},
		// Sub-millisecond and very long: bucket 0's bound, and the last
		// bucket's lower bound.
		{name: "extremes", obs: []obs{{0, 50}, {40 * 24 * time.Hour, 50}}, total: 100,
			p50: time.Millisecond, p90: 1 << 30 * time.Millisecond, p99: 1 << 30 * time.Millisecond},
	} {
		var b [retrystate.LatencyBuckets]int64
		for _, o := range c.obs {
			b[retrystate.LatencyBucket(o.d)] += o.n
		}
		p50, total := retrystate.LatencyQuantile(&b, 0.5)
		p90, _ := retrystate.LatencyQuantile(&b, 0.9)
		p99, _ := retrystate.LatencyQuantile(&b, 0.99)
		if p50 != c.p50 || p90 != c.p90 || p99 != c.p99 || total != c.total {
			t.Errorf("%s: p50 %s p90 %s p99 %s of %d, want %s %s %s of %d", c.name, p50, p90, p99, total,
				c.p50, c.p90, c.p99, c.total)
		}
	}
}

// TestLatencyStore: LatencyAdd adds to the hours' hashes and sets their
// expiry; it leaves out what it must not keep (a name with the field
// separator or too long, a bucket out of range); LatencyRead merges the
// hours asked for, of one workflow or all, and skips fields it did not
// write.
func TestLatencyStore(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	h := retrystate.LatencyHour(t0)
	counts := []retrystate.LatencyCount{
		{Hour: h, Kind: retrystate.LatencyDuration, Workflow: "wf", Step: "a", Bucket: 10, Count: 3},
		{Hour: h - 1, Kind: retrystate.LatencyDuration, Workflow: "wf", Step: "a", Bucket: 10, Count: 2},
		{Hour: h - 30, Kind: retrystate.LatencyWait, Workflow: "wf", Step: "a", Bucket: 4, Count: 7},
		{Hour: h, Kind: retrystate.LatencyWait, Workflow: "other", Step: "<b>", Bucket: 0, Count: 1},
		// Refused: nothing of them is written.
		{Hour: h, Kind: retrystate.LatencyDuration, Workflow: "wf|x", Step: "a", Bucket: 1, Count: 1},
		{Hour: h, Kind: retrystate.LatencyDuration, Workflow: "wf", Step: strings.Repeat("s", 129), Bucket: 1, Count: 1},
		{Hour: h, Kind: retrystate.LatencyDuration, Workflow: "wf", Step: "a", Bucket: retrystate.LatencyBuckets, Count: 1},
		{Hour: h, Kind: "x", Workflow: "wf", Step: "a", Bucket: 1, Count: 1},
	}
	if err := s.LatencyAdd(ctxb, counts); err != nil {
		t.Fatal(err)
	}
	key := func(hour int64) string { return fmt.Sprintf("cairn:{%s}:lat:%d", s.Queue(), hour) }
	fields, err := rdb.HGetAll(ctxb, key(h)).Result()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"d|wf|a|10": "3", "w|other|<b>|0": "1"}
	if fmt.Sprint(fields) != fmt.Sprint(want) {
		t.Errorf("hour %d holds %v, want %v", h, fields, want)
	}
	for _, hour := range []int64{h, h - 1, h - 30} {
		ttl, err := rdb.PTTL(ctxb, key(hour)).Result()
		if err != nil || ttl <= retrystate.LatencyRetention-time.Minute || ttl > retrystate.LatencyRetention {
			t.Errorf("hour %d expires in %s (%v), want %s", hour, ttl, err, retrystate.LatencyRetention)
		}
	}
	// Fields another writer left: not ours, skipped.
	rdb.HSet(ctxb, key(h), "d|wf|a", "5", "d|wf|a|x", "5", "q|wf|a|3", "5", "d|wf|a|3", "-2", "d|wf|a|2", "many")

	read := func(from, to int64, wf string) map[string]string {
		t.Helper()
		ss, err := s.LatencyRead(ctxb, from, to, wf)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, x := range ss {
			for i, n := range x.Duration {
				if n != 0 {
					out[fmt.Sprintf("d %s/%s %d", x.Workflow, x.Step, i)] = fmt.Sprint(n)
				}
			}
			for i, n := range x.Wait {
				if n != 0 {
					out[fmt.Sprintf("w %s/%s %d", x.Workflow, x.Step, i)] = fmt.Sprint(n)
				}
			}
		}
		return out
	}
	for _, c := range []struct {
		from, to int64
		wf       string
		want     map[string]string
	}{
		{h, h, "", map[string]string{"d wf/a 10": "3", "w other/<b> 0": "1"}},
		{h - 1, h, "", map[string]string{"d wf/a 10": "5", "w other/<b> 0": "1"}},
		{h - 1, h, "wf", map[string]string{"d wf/a 10": "5"}},
		{h - 24, h, "wf", map[string]string{"d wf/a 10": "5"}},
		{h - 168, h, "wf", map[string]string{"d wf/a 10": "5", "w wf/a 4": "7"}},
		{h - 168, h - 2, "", map[string]string{"w wf/a 4": "7"}},
		{h + 1, h, "", map[string]string{}},
	} {
		if got := read(c.from, c.to, c.wf); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("hours %d..%d of %q: %v, want %v", c.from-h, c.to-h, c.wf, got, c.want)
		}
	}
}
