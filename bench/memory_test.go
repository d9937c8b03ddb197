package bench

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// runIDPattern matches a run ID in a key name: 26 characters of lowercase
// Crockford base32 (internal/engine/ids.go). Every key a run keeps for itself
// carries its ID; no shared key of a queue has such a run of characters.
var runIDPattern = regexp.MustCompile(`[0-9a-hjkmnp-tv-z]{26}`)

// defPrefix starts the key of a definition's template, named by a sha256
// (retrystate's keys.definition), which runIDPattern would take for a run
// ID.
const defPrefix = "cairn:{q}:def:"

// runMemory is the Redis memory a queue's finished runs keep: every key of
// the queue (cairn:{q}:* and asynq:{q}:*, read with SCAN once the phase's
// workers have stopped), its size from MEMORY USAGE <key> SAMPLES 0 (which
// counts every element, the key's name and its entry in the keyspace,
// though not its entry in the table of expiries). A key whose name holds a
// run ID is the run's own (run hash, journal, mailbox, leftover asynq
// task); any other key is shared by the runs of the queue (indexes,
// definitions, the notification stream, asynq's counters), and each run's
// share is its size divided by the runs (an index holding every run once,
// as idx:all and idx:status:succeeded do after a phase, is its size divided
// by its members).
type runMemory struct {
	runs int
	// own and shared: bytes and keys by key shape: the key's name with
	// the queue as {q} and a run ID as <id>.
	own, shared map[string]keyStat
	// usedDelta is how much INFO used_memory grew over the phase: a check
	// on the sum, which also counts the table of expiries, the
	// allocator's rounding and whatever else the server holds (client
	// buffers, asynq's keys of other queues).
	usedDelta int64
}

type keyStat struct {
	bytes int64
	keys  int
}

// Categories of the breakdown, by key shape.
const (
	catRunHash = "run hash"
	catJournal = "journal"
	catIndexes = "indexes"
	catOther   = "other"
)

func category(shape string) string {
	switch {
	case shape == "cairn:{q}:run:<id>":
		return catRunHash
	case shape == "cairn:{q}:run:<id>:j":
		return catJournal
	case strings.HasPrefix(shape, "cairn:{q}:idx:"):
		return catIndexes
	}
	return catOther
}

// perRun is the bytes a finished run keeps: its own keys and its share of
// the shared ones.
func (m *runMemory) perRun() float64 {
	var total int64
	for _, s := range m.own {
		total += s.bytes
	}
	for _, s := range m.shared {
		total += s.bytes
	}
	return float64(total) / float64(m.runs)
}

// byCategory returns the bytes per run of each category.
func (m *runMemory) byCategory() map[string]float64 {
	out := map[string]float64{}
	for _, set := range []map[string]keyStat{m.own, m.shared} {
		for shape, s := range set {
			out[category(shape)] += float64(s.bytes) / float64(m.runs)
		}
	}
	return out
}

// print prints the line "bytes/run <name> <total>" (at the start of the
// line, for grep) with the breakdown, then the bytes per run of each key
// shape.
func (m *runMemory) print(name string) {
	c := m.byCategory()
	fmt.Printf("bytes/run %s %.0f  (Redis memory per finished %d-step run with no output, MEMORY USAGE of every key of the queue, %d runs: "+
		"run hash %.0f, journal %.0f, indexes %.0f, other %.0f; INFO used_memory grew %.0f per run over the phase)\n",
		name, m.perRun(), stepsPerChain, m.runs, c[catRunHash], c[catJournal], c[catIndexes], c[catOther],
		float64(m.usedDelta)/float64(m.runs))
	for _, part := range []struct {
		title string
		set   map[string]keyStat
	}{{"the run's own keys", m.own}, {"shared keys, per run", m.shared}} {
		shapes := slices.Sorted(maps.Keys(part.set))
		slices.SortStableFunc(shapes, func(a, b string) int { return int(part.set[b].bytes - part.set[a].bytes) })
		items := make([]string, 0, len(shapes))
		for _, shape := range shapes {
			s := part.set[shape]
			items = append(items, fmt.Sprintf("%s %.1f (%d key(s))", shape, float64(s.bytes)/float64(m.runs), s.keys))
		}
		fmt.Printf("  %s: %s\n", part.title, strings.Join(items, ", "))
	}
}

// measureRunMemory measures the memory the runs of queue keep (runs of
// them, all finished); used0 is INFO used_memory before the phase.
func measureRunMemory(ctx context.Context, ctl *control, queue string, runs int, used0 int64) (*runMemory, error) {
	m := &runMemory{runs: runs, own: map[string]keyStat{}, shared: map[string]keyStat{}}
	var keys []string
	for _, pattern := range []string{"cairn:{" + queue + "}:*", "asynq:{" + queue + "}:*"} {
		ks, err := ctl.scan(ctx, pattern)
		if err != nil {
			return nil, err
		}
		keys = append(keys, ks...)
	}
	sizes, err := ctl.memoryUsage(ctx, keys)
	if err != nil {
		return nil, err
	}
	for i, k := range keys {
		shape := strings.ReplaceAll(k, "{"+queue+"}", "{q}")
		set := m.shared
		switch {
		case strings.HasPrefix(shape, defPrefix):
			shape = defPrefix + "<sha>" // a definition's template: shared by its runs
		case runIDPattern.MatchString(shape):
			shape = runIDPattern.ReplaceAllString(shape, "<id>")
			set = m.own
		}
		s := set[shape]
		s.bytes += sizes[i]
		s.keys++
		set[shape] = s
	}
	used1, err := ctl.usedMemory(ctx)
	if err != nil {
		return nil, err
	}
	m.usedDelta = used1 - used0
	return m, nil
}

// scan returns every key matching pattern (SCAN).
func (c *control) scan(ctx context.Context, pattern string) ([]string, error) {
	var out []string
	var cursor uint64
	for {
		c.own["scan"]++
		ks, next, err := c.rdb.Scan(ctx, cursor, pattern, 1000).Result()
		if err != nil {
			return nil, err
		}
		out = append(out, ks...)
		if cursor = next; cursor == 0 {
			return out, nil
		}
	}
}

// memoryUsage returns MEMORY USAGE <key> SAMPLES 0 of each key (0 for a
// key that is gone), pipelined.
func (c *control) memoryUsage(ctx context.Context, keys []string) ([]int64, error) {
	out := make([]int64, len(keys))
	const batch = 1000
	for lo := 0; lo < len(keys); lo += batch {
		hi := min(lo+batch, len(keys))
		pipe := c.rdb.Pipeline()
		cmds := make([]*redis.IntCmd, hi-lo)
		for i := range cmds {
			cmds[i] = pipe.MemoryUsage(ctx, keys[lo+i], 0)
		}
		c.own["memory|usage"] += int64(len(cmds))
		if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil { //nolint:errorlint // Exec returns the first command's error as is
			return nil, err
		}
		for i, cmd := range cmds {
			out[lo+i] = cmd.Val()
		}
	}
	return out, nil
}

// usedMemory returns INFO memory's used_memory.
func (c *control) usedMemory(ctx context.Context) (int64, error) {
	c.own["info"]++
	s, err := c.rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(infoField(s, "used_memory"), 10, 64)
}
