package bench

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// control is the benchmark's own connection to Redis, for everything that
// is not the workload: the version, CONFIG RESETSTAT, INFO commandstats and
// the completion poll. It counts its own calls by commandstats name so they
// can be subtracted from the server's figures.
type control struct {
	rdb *redis.Client
	own map[string]int64 // since the last resetStats
}

func newControl(addr string) *control {
	return &control{rdb: redis.NewClient(&redis.Options{Addr: addr}), own: map[string]int64{}}
}

func (c *control) close() { _ = c.rdb.Close() }

// version returns the redis-server version (INFO server).
func (c *control) version(ctx context.Context) (string, error) {
	c.own["info"]++
	s, err := c.rdb.Info(ctx, "server").Result()
	if err != nil {
		return "", err
	}
	return infoField(s, "redis_version"), nil
}

// resetStats zeroes the server's command statistics (CONFIG RESETSTAT).
func (c *control) resetStats(ctx context.Context) error {
	c.own = map[string]int64{}
	if err := c.rdb.ConfigResetStat(ctx).Err(); err != nil {
		return err
	}
	c.own["config|resetstat"]++ // counted after the reset it made
	return nil
}

// cpu returns the CPU time redis-server has used (INFO cpu, user + sys).
func (c *control) cpu(ctx context.Context) (time.Duration, error) {
	user, sys, err := c.cpuSplit(ctx)
	return user + sys, err
}

// cpuSplit returns the CPU time redis-server has used in user space and in
// the kernel (INFO cpu's used_cpu_user and used_cpu_sys): the kernel's is
// mostly the sockets' reads and writes, which a round trip costs whatever
// it carries.
func (c *control) cpuSplit(ctx context.Context) (user, sys time.Duration, err error) {
	c.own["info"]++
	s, err := c.rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, 0, err
	}
	var v [2]float64
	for i, f := range []string{"used_cpu_user", "used_cpu_sys"} {
		if v[i], err = strconv.ParseFloat(infoField(s, f), 64); err != nil {
			return 0, 0, fmt.Errorf("INFO cpu: %s: %w", f, err)
		}
	}
	return time.Duration(v[0] * float64(time.Second)), time.Duration(v[1] * float64(time.Second)), nil
}

// processCPU returns the CPU time this process (the workload's Go side)
// has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// zcard is the completion poll.
func (c *control) zcard(ctx context.Context, key string) (int64, error) {
	c.own["zcard"]++
	return c.rdb.ZCard(ctx, key).Result()
}

// commandStats returns the calls per command since the last resetStats
// (INFO commandstats), less the control's own calls.
func (c *control) commandStats(ctx context.Context) (map[string]int64, error) {
	c.own["info"]++ // may or may not be in its own output: subtraction floors at 0
	s, err := c.rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	stats, err := parseCommandStats(s)
	if err != nil {
		return nil, err
	}
	for name, n := range c.own {
		stats[name] = max(stats[name]-n, 0)
		if stats[name] == 0 {
			delete(stats, name)
		}
	}
	return stats, nil
}

// parseCommandStats reads the calls of each "cmdstat_<name>:calls=N,..."
// line of INFO commandstats. Redis 7 names subcommands "config|resetstat".
func parseCommandStats(info string) (map[string]int64, error) {
	out := map[string]int64{}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		rest, ok := strings.CutPrefix(line, "cmdstat_")
		if !ok {
			continue
		}
		name, fields, ok := strings.Cut(rest, ":")
		if !ok {
			return nil, fmt.Errorf("commandstats: malformed line %q", line)
		}
		for f := range strings.SplitSeq(fields, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("commandstats: malformed line %q", line)
				}
				out[name] = n
			}
		}
	}
	return out, sc.Err()
}

func infoField(info, field string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return "?"
}

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// tripCounter is a go-redis hook on the workload's client (shared by the
// asynq servers, the asynq client and Cairn). It counts round trips, a
// pipeline being one, and times asynq's dequeues. With detail, it also
// counts top-level commands by name, EVALSHA by script, with the time the
// client waited for each.
type tripCounter struct {
	trips atomic.Int64
	// dequeues and dequeueTime count asynq's dequeue calls and the time
	// the client waited for them: an asynq server fetches one task at a
	// time, in one loop, so this latency bounds its throughput.
	dequeues, dequeueTime atomic.Int64

	detail bool
	labels *scriptLabels

	mu    sync.Mutex
	calls map[string]*callStat
}

type callStat struct {
	n     int64
	spent time.Duration
}

func newTripCounter(detail bool, labels *scriptLabels) *tripCounter {
	return &tripCounter{detail: detail, labels: labels, calls: map[string]*callStat{}}
}

func (h *tripCounter) reset() {
	h.trips.Store(0)
	h.dequeues.Store(0)
	h.dequeueTime.Store(0)
	h.mu.Lock()
	h.calls = map[string]*callStat{}
	h.mu.Unlock()
}

func (h *tripCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *tripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.trips.Add(1)
		learnScript(cmd)
		dequeue := isDequeue(cmd)
		if !h.detail && !dequeue {
			return next(ctx, cmd)
		}
		start := time.Now()
		err := next(ctx, cmd)
		d := time.Since(start)
		if dequeue {
			h.dequeues.Add(1)
			h.dequeueTime.Add(int64(d))
		}
		if h.detail {
			h.record(h.labels.label(cmd), d)
		}
		return err
	}
}

// isName tells whether a command (its arguments) is the command name,
// written in lower case. Unlike Cmder.Name, which lowercases a copy, it
// allocates nothing: the hook runs on every command of the phase, and its
// cost is counted in the Go CPU per unit.
func isName(args []any, name string) bool {
	s, _ := args[0].(string)
	return len(s) == len(name) && strings.EqualFold(s, name)
}

// isDequeue tells asynq's dequeue script (rdb.Dequeue: EVALSHA with
// KEYS[1] asynq:{<queue>}:pending) from the other commands.
func isDequeue(cmd redis.Cmder) bool {
	args := cmd.Args()
	if len(args) < 4 || !isName(args, "evalsha") && !isName(args, "eval") {
		return false
	}
	key, _ := args[3].(string)
	return strings.HasPrefix(key, "asynq:{") && strings.HasSuffix(key, "}:pending")
}

func (h *tripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.trips.Add(1)
		if !h.detail {
			return next(ctx, cmds)
		}
		start := time.Now()
		err := next(ctx, cmds)
		h.record("pipeline["+pipelineNames(cmds)+"]", time.Since(start))
		return err
	}
}

// pipelineNames names a pipeline's commands, a run of one name once with
// its count: "sadd,evalsha*500".
func pipelineNames(cmds []redis.Cmder) string {
	var parts []string
	for i := 0; i < len(cmds); {
		j := i
		for j < len(cmds) && cmds[j].Name() == cmds[i].Name() {
			j++
		}
		if j-i > 1 {
			parts = append(parts, fmt.Sprintf("%s*%d", cmds[i].Name(), j-i))
		} else {
			parts = append(parts, cmds[i].Name())
		}
		i = j
	}
	return strings.Join(parts, ",")
}

func (h *tripCounter) record(label string, d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.calls[label]
	if s == nil {
		s = &callStat{}
		h.calls[label] = s
	}
	s.n++
	s.spent += d
}

func (h *tripCounter) snapshot() map[string]callStat {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]callStat, len(h.calls))
	for k, v := range h.calls {
		out[k] = *v
	}
	return out
}

// scriptLabels names EVALSHA calls: Cairn's scripts by their file (their
// SHA1 is computed from retrystate/lua, read from the source tree), others
// (asynq's) by the shape of their first key, e.g. "asynq:{q}:pending".
type scriptLabels struct {
	bySHA map[string]string
	queue string
}

// loadScriptLabels names the scripts that stand alone (renew.lua,
// unlock.lua, ...): their SHA1 is their file's. retrystate puts into each
// other script the helpers it needs (retrystate/scripts.go): those are
// learned from the EVAL that loads them (learnScript).
func loadScriptLabels() *scriptLabels {
	l := &scriptLabels{bySHA: map[string]string{}}
	dir := filepath.Join("..", "retrystate", "lua")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return l
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".lua") {
			continue
		}
		body, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		l.bySHA[sha(string(body))] = "cairn " + name
	}
	return l
}

// learned maps the SHA1 of each Cairn script a hooked client loaded (the
// EVAL go-redis sends after a NOSCRIPT reply) to its label: retrystate
// puts into each script the helpers it needs, so its SHA1 cannot be
// computed here from the files alone. The label is the name in the first
// header line "-- <name>.lua: ..." of the body (the script's own, before
// its helpers).
var learned sync.Map

var scriptHeader = regexp.MustCompile(`(?m)^-- ([a-z_]+\.lua):`)

func learnScript(cmd redis.Cmder) {
	args := cmd.Args()
	var body string
	switch {
	case len(args) >= 2 && isName(args, "eval"):
		body, _ = args[1].(string)
	case len(args) >= 3 && isName(args, "script") && fmt.Sprint(args[1]) == "load":
		// SCRIPT LOAD, as Store.CheckTasks sends after a NOSCRIPT in its
		// pipeline.
		body, _ = args[2].(string)
	default:
		return
	}
	m := scriptHeader.FindAllStringSubmatch(body, 1)
	if len(m) == 0 {
		return
	}
	learned.LoadOrStore(sha(body), "cairn "+m[0][1])
}

func sha(s string) string {
	h := sha1.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}

func (l *scriptLabels) forQueue(q string) *scriptLabels {
	return &scriptLabels{bySHA: l.bySHA, queue: q}
}

func (l *scriptLabels) label(cmd redis.Cmder) string {
	args := cmd.Args()
	strs := make([]string, min(len(args), 4))
	for i := range strs {
		strs[i], _ = args[i].(string)
	}
	return l.labelArgs(strs)
}

// labelArgs names a command by its first arguments: its name, and for a
// script the script or the shape of its first key.
func (l *scriptLabels) labelArgs(args []string) string {
	if len(args) == 0 {
		return "?"
	}
	name := strings.ToLower(args[0])
	if (name != "evalsha" && name != "eval") || len(args) < 4 {
		return name
	}
	id := strings.ToLower(args[1])
	if name == "eval" {
		id = sha(args[1])
	}
	if label, ok := l.bySHA[id]; ok {
		return name + " " + label
	}
	if label, ok := learned.Load(id); ok {
		return name + " " + label.(string) //nolint:forcetypeassert // learned holds strings only
	}
	key := args[3]
	if l.queue != "" {
		key = strings.ReplaceAll(key, "{"+l.queue+"}", "{q}")
	}
	if parts := strings.Split(key, ":"); len(parts) > 3 {
		key = strings.Join(parts[:3], ":") + ":*"
	}
	return name + " asynq? key " + key
}

// startSlowlog makes the server log every command with its execution time
// (SLOWLOG with a threshold of 0), for the detail of a phase.
func (c *control) startSlowlog(ctx context.Context) error {
	for _, kv := range [][2]string{{"slowlog-max-len", "1000000"}, {"slowlog-log-slower-than", "0"}} {
		c.own["config|set"]++
		if err := c.rdb.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			return err
		}
	}
	c.own["slowlog|reset"]++
	return c.rdb.SlowLogReset(ctx).Err()
}

// inScript prefixes the label of a command a script called.
const inScript = "  in scripts: "

// serverTime reads the slow log since startSlowlog, restores the server's
// default slow-log settings and returns the execution time by command
// label, leaving out the control's own commands. Commands called by scripts
// (the slow log shows their client as "?:0") are labelled with inScript.
func (c *control) serverTime(ctx context.Context, labels *scriptLabels) (map[string]callStat, error) {
	entries, err := c.rdb.SlowLogGet(ctx, -1).Result()
	if err != nil {
		return nil, err
	}
	for _, kv := range [][2]string{{"slowlog-log-slower-than", "10000"}, {"slowlog-max-len", "128"}} {
		if err := c.rdb.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			return nil, err
		}
	}
	if err := c.rdb.SlowLogReset(ctx).Err(); err != nil {
		return nil, err
	}
	out := map[string]callStat{}
	for _, e := range entries {
		label := labels.labelArgs(e.Args)
		switch label {
		case "info", "config", "slowlog", "zcard":
			continue
		}
		if e.ClientAddr == "?:0" { // called by a script: its time is in the script's
			label = inScript + label
		}
		s := out[label]
		s.n++
		s.spent += e.Duration
		out[label] = s
	}
	return out, nil
}

// topCounts returns the entries of m sorted by count, largest first.
func topCounts(m map[string]int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	return keys
}
