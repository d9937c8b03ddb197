package retrystate

import (
	"errors"
	"io/fs"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// replyKind is a decoder with a well-formed reply of each of its outcome
// words, and the script whose replies it decodes.
type replyKind struct {
	script string
	decode func([]string) error
	valid  [][]string
}

func ignore[T any](_ T, err error) error { return err }

func replyKinds() []replyKind {
	ok := []string{"ok", "1", "0", "0", "{}", "{}", "1", "0", "", "0", "0"}
	return []replyKind{
		{"create.lua", func(r []string) error { return ignore(decodeCreate(r, "run", NewStep{Name: "a"})) }, [][]string{
			{"created", "run_s0_a1", "1", "0"},
			{"created", "run_s0_a1", "1", "1"},
			{"exists", "other"},
			{"waiting", "ordering_key", "3"},
			{"stale", "abc"},
			{"stale", ""},
		}},
		{"begin.lua", func(r []string) error { return ignore(decodeBegin(r, 0, false)) }, [][]string{
			ok,
			append(slices.Clone(ok), "a", `"out"`),
			{"ok", "2", "1", "1", `{"in":1}`, "{}", "2", "1800000000000", "b", "0", "60000"},
			{"ok", "2", "0", "interrupted", `{"in":1}`, "{}", "2", "0", "", "0", "0"},
			{"gone"},
			{"ended", "failed"},
			{"stale"},
			{"stale", "0", "a", "2", "1", "1800000000000", "60000"},
			{"busy", "6000"},
			{"early", "2000"},
			{"failed", "run_timeout", "why", ""},
			{"wait", "await"},
			{"wake", "sleep"},
			{"deferred", "1800000020000", "0", "a", "2", "1", "60000"},
			{"paused"},
		}},
		{"begin.lua, traced", func(r []string) error { return ignore(decodeBegin(r, 0, true)) }, [][]string{
			append(slices.Clone(ok), ""),
			append(slices.Clone(ok), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
			append(slices.Clone(ok), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "a", `"out"`),
			{"wait", "await", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
			{"wake", "sleep", ""},
		}},
		{"wait.lua", func(r []string) error { return ignore(decodeWait(r)) }, [][]string{
			{"waiting", "signal", "1800000000000", "1", "b", "1", "1", "60000", "1"},
			{"next", "2", "c", "1", "60000", "0"},
			{"succeeded"},
			{"failed", "signal_timeout", "why", "compensating"},
			{"early", "2000"},
			{"noop", "state moved on"},
		}},
		{"signal.lua", func(r []string) error { return ignore(decodeSignal(r)) }, [][]string{
			{"delivered", "b", "run_s1_a1_g1", "2", "c", "1", "60000", "wf"},
			{"succeeded", "b", "run_s1_a1_g1"},
			{"queued", "3"},
			{"duplicate"},
			{"refused", "why"},
			{"full", "100"},
			{"ended", "failed"},
			{"gone"},
		}},
		{"complete.lua", func(r []string) error { return ignore(decodeComplete(r)) }, [][]string{
			{"next", "1", "b", "1", "60000", "1"},
			{"inline", "1", "b", "1", "60000", "{}", "0", "c", "0", "60000"},
			{"inline", "2", "c", "1", "60000", "{}", "1800000000000", "", "0", "0"},
			{"succeeded"},
			{"fenced", "fence lost"},
			{"done", "running"},
		}},
		{"compdone.lua", func(r []string) error { return ignore(decodeCompDone(r)) }, [][]string{
			{"next", "1000", "compensate:a", "1", "60000", "1"},
			{"succeeded"},
			{"compensated", "permanent_error"},
			{"failed", "permanent_error", "why", ""},
			{"fenced", "fence lost"},
			{"done", "compensating"},
		}},
		{"fail.lua", func(r []string) error { return ignore(decodeFail(r, 0)) }, [][]string{
			{"retry", "1800000000000", "2", "60000", "0"},
			{"failed", "permanent_error", "why", "continued"},
			{"fenced", "fence lost"},
			{"done", "failed", "permanent_error"},
		}},
		{"release.lua", func(r []string) error { return ignore(decodeRelease(r)) }, [][]string{
			{"released", "0", "a", "1", "1", "60000", "0"},
			{"fenced", "fence lost"},
		}},
		{"snooze.lua", func(r []string) error { return ignore(decodeSnooze(r)) }, [][]string{
			{"snoozed", "0", "a", "1", "2", "1800000000000", "60000", "1"},
			{"failed", "run_timeout", "why", ""},
			{"fenced", "fence lost"},
			{"done", "running"},
		}},
		{"goto.lua", func(r []string) error { return ignore(decodeGoto(r)) }, [][]string{
			{"goto", "0", "a", "2", "60000", "0"},
			{"failed", "invalid_goto", "why", "succeeded"},
			{"fenced", "fence lost"},
			{"done", "running"},
		}},
		{"cancel.lua", func(r []string) error { return ignore(decodeCancel(r)) }, [][]string{
			{"cancelled", "run_s0_a1", "pending"},
			{"compensating", "run_s1_a1", "running"},
			{"already", "cancelled"},
			{"refused", "why"},
			{"ended", "succeeded"},
			{"gone"},
		}},
		{"redispatch.lua", func(r []string) error { return ignore(decodeRedispatch(r)) }, [][]string{
			{"redispatched", "0", "a", "1", "1", "60000", "1", "wf"},
			{"failed", "crash_budget_exhausted", "why", "compensated"},
			{"attention", "why"},
			{"noop", "fence alive"},
		}},
		{"repair.lua", func(r []string) error { return ignore(decodeRepair(r)) }, [][]string{
			{"repair", "0", "a", "1", "1", "0", "60000", "task_archived", "wf"},
			{"attention", "why"},
			{"noop", "state moved on"},
			{"recheck", "1800000000000"},
			{"crashed"},
		}},
		{"timeout.lua", func(r []string) error { return ignore(decodeTimeout(r)) }, [][]string{
			{"failed", "run_s0_a1", "pending", "why", ""},
			{"noop", "no deadline"},
		}},
		{"operate.lua", func(r []string) error { return ignore(decodeAction(r, ActionRetry)) }, [][]string{
			{"dispatch", "0", "a", "2", "60000", "wf"},
			{"succeeded"},
			{"refused", "why"},
			{"waiting", "workflow_limit", "1"},
			{"gone"},
		}},
		{"pause.lua", func(r []string) error { return ignore(decodePause(r, ActionResume)) }, [][]string{
			{"paused"},
			{"resumed", "", "0"},
			{"resumed", "run_s0_a2", "1800000005000"},
			{"noop", "not paused"},
			{"ended", "succeeded"},
			{"gone"},
		}},
		{"restore.lua", func(r []string) error { return ignore(decodeAction(r, ActionRestore)) }, [][]string{
			{"dispatch", "0", "a", "2", "60000", "wf"},
			{"refused", "why"},
			{"waiting", "ordering_key", "1"},
			{"gone"},
		}},
		{"retrynow.lua", func(r []string) error { return ignore(decodeRetryNow(r)) }, [][]string{
			{"due", "1", "b", "2", "1800000060000", "scheduled"},
			{"noop", "why"},
			{"refused", "why"},
			{"gone"},
		}},
		{"gate.lua", func(r []string) error { _, _, err := decodeGate(r); return err }, [][]string{
			{"gate", "0", "2"},
		}},
		{"peek.lua", func(r []string) error { return ignore(decodePeek(r)) }, [][]string{
			{"running", "0", "1800000000000", "0", "a", "running", "1", "0", "run_s0_a1", "0", "1800000010000", "60000"},
		}},
	}
}

// TestDecodersRejectMalformedReplies: every decoder accepts its well-formed
// replies, and rejects with ErrUnexpectedReply (never a panic) each one cut
// short, one with an element too many, an empty one, and an unknown
// outcome.
func TestDecodersRejectMalformedReplies(t *testing.T) {
	t.Parallel()
	for _, k := range replyKinds() {
		valid := map[string]bool{}
		for _, r := range k.valid {
			valid[strings.Join(r, "\x00")] = true
		}
		rejects := func(what string, r []string) {
			t.Helper()
			if err := k.decode(r); !errors.Is(err, ErrUnexpectedReply) {
				t.Errorf("%s: %s %q: %v; want ErrUnexpectedReply", k.script, what, r, err)
			}
		}
		for _, r := range k.valid {
			if err := k.decode(r); err != nil {
				t.Errorf("%s: %q: %v", k.script, r, err)
			}
			for n := range r {
				if !valid[strings.Join(r[:n], "\x00")] {
					rejects("short reply", r[:n])
				}
			}
			rejects("long reply", append(slices.Clone(r), "0"))
		}
		rejects("empty reply", nil)
		if k.script != "peek.lua" {
			if err := k.decode([]string{"bogus", "0"}); !errors.Is(err, ErrUnexpectedReply) || !errors.Is(err, errUnknownOutcome) {
				t.Errorf("%s: unknown outcome: %v", k.script, err)
			}
		}
	}
}

// TestDecodersRejectMalformedElements: a number, flag or state that does not
// parse is an error, not a zero.
func TestDecodersRejectMalformedElements(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		decode func() error
	}{
		{"begin: attempt", func() error {
			return ignore(decodeBegin([]string{"ok", "one", "0", "0", "{}", "{}", "1", "0", "", "0", "0"}, 0, false))
		}},
		{"begin: resumed", func() error {
			return ignore(decodeBegin([]string{"ok", "1", "0", "yes", "{}", "{}", "1", "0", "", "0", "0"}, 0, false))
		}},
		{"begin: deadline", func() error {
			return ignore(decodeBegin([]string{"ok", "1", "0", "0", "{}", "{}", "1", "soon", "", "0", "0"}, 0, false))
		}},
		{"begin: next timeout", func() error {
			return ignore(decodeBegin([]string{"ok", "1", "0", "0", "{}", "{}", "1", "0", "b", "0", "1.5"}, 0, false))
		}},
		{"begin: wait", func() error { return ignore(decodeBegin([]string{"busy", "6s"}, 0, false)) }},
		{"begin: stale dispatch", func() error {
			return ignore(decodeBegin([]string{"stale", "0", "a", "2", "g1", "0", "60000"}, 0, false))
		}},
		{"create: attempt", func() error { return ignore(decodeCreate([]string{"created", "t", "x", "0"}, "run", NewStep{})) }},
		{"create: enqueued", func() error {
			return ignore(decodeCreate([]string{"created", "t", "1", "yes"}, "run", NewStep{}))
		}},
		{"complete: enqueued", func() error {
			return ignore(decodeComplete([]string{"next", "1", "b", "1", "60000", "yes"}))
		}},
		{"complete: index", func() error {
			return ignore(decodeComplete([]string{"next", "b", "1", "1", "60000", "0"}))
		}},
		{"fail: due", func() error { return ignore(decodeFail([]string{"retry", "later", "2", "60000", "0"}, 0)) }},
		{"release: gen", func() error {
			return ignore(decodeRelease([]string{"released", "0", "a", "1", "x", "60000", "0"}))
		}},
		{"redispatch: crashes", func() error {
			return ignore(decodeRedispatch([]string{"redispatched", "0", "a", "1", "1", "60000", "many", "wf"}))
		}},
		{"repair: due", func() error {
			return ignore(decodeRepair([]string{"repair", "0", "a", "1", "1", "x", "60000", "task_missing", "wf"}))
		}},
		{"repair: recheck at", func() error { return ignore(decodeRepair([]string{"recheck", "soon"})) }},
		{"operate: attempt", func() error {
			return ignore(decodeAction([]string{"dispatch", "0", "a", "two", "60000", "wf"}, ActionRecover))
		}},
		{"restore: succeeded", func() error { return ignore(decodeAction([]string{"succeeded"}, ActionRestore)) }},
		{"peek: needs_attention", func() error {
			return ignore(decodePeek([]string{"running", "maybe", "1", "0", "a", "running", "1", "0", "t", "0", "0", "60000"}))
		}},
		{"renew", func() error { return ignore(decodeRenewal(2)) }},
		{"begin: wait kind", func() error { return ignore(decodeBegin([]string{"wait", "nap"}, 0, false)) }},
		{"wait: reason", func() error {
			return ignore(decodeWait([]string{"waiting", "ordering_key", "1", "1", "b", "1", "1", "60000", "1"}))
		}},
		{"wait: until", func() error {
			return ignore(decodeWait([]string{"waiting", "timer", "soon", "1", "b", "1", "1", "60000", "1"}))
		}},
		{"signal: next attempt", func() error {
			return ignore(decodeSignal([]string{"delivered", "b", "t", "2", "c", "one", "60000", "wf"}))
		}},
		{"signal: pending", func() error { return ignore(decodeSignal([]string{"queued", "many"})) }},
	} {
		if err := c.decode(); !errors.Is(err, ErrUnexpectedReply) {
			t.Errorf("%s: %v; want ErrUnexpectedReply", c.name, err)
		}
	}
}

var (
	// luaReturnWord matches a reply returned as a table constructor,
	// {"word", ...}, or passed through complete.lua's acked.
	luaReturnWord = regexp.MustCompile(`return\s*(?:acked\(\s*)?\{\s*"(\w+)"`)
	// luaTableWord matches a local assigned a table that starts with a
	// word: a reply when the script returns that local.
	luaTableWord = regexp.MustCompile(`local\s+(\w+)\s*=\s*\{\s*"(\w+)"`)
)

// replyWords returns the outcome words a script replies with.
func replyWords(src string) []string {
	src = stripLuaComments(src)
	words := map[string]bool{}
	for _, m := range luaReturnWord.FindAllStringSubmatch(src, -1) {
		words[m[1]] = true
	}
	for _, m := range luaTableWord.FindAllStringSubmatch(src, -1) {
		if regexp.MustCompile(`(?m)\breturn\s+` + m[1] + `\s*$`).MatchString(src) {
			words[m[2]] = true
		}
	}
	return slices.Sorted(maps.Keys(words))
}

// TestEveryReplyWordIsDecoded: the outcome words each script replies with
// are those its decoder knows, no more and no fewer, so an outcome cannot be
// added on one side only.
func TestEveryReplyWordIsDecoded(t *testing.T) {
	t.Parallel()
	files, err := fs.Glob(luaFS, "lua/*.lua")
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]replyKind{}
	for _, k := range replyKinds() {
		kinds[k.script] = k
	}
	// The sagas' helpers (fail_run("saga"), lua/lib/fail_run.lua) make the
	// replies of the scripts that return what they return.
	sagaWords := replyWords(mustRead("lua/lib/fail_run.lua"))
	for _, f := range files {
		name := strings.TrimPrefix(f, "lua/")
		src := mustRead(f)
		lua := replyWords(src)
		if strings.Contains(stripLuaComments(src), `return fail_run("saga")`) {
			lua = slices.Compact(slices.Sorted(slices.Values(append(lua, sagaWords...))))
		}
		k, ok := kinds[name]
		if !ok {
			if len(lua) > 0 {
				t.Errorf("%s replies with %q, and no decoder decodes it", name, lua)
			}
			continue
		}
		if name == "peek.lua" {
			continue // no outcome word
		}
		known := map[string]bool{}
		for _, r := range k.valid {
			known[r[0]] = true
			if err := k.decode([]string{r[0]}); errors.Is(err, errUnknownOutcome) {
				t.Errorf("%s: the decoder does not know %q", name, r[0])
			}
		}
		if got := slices.Sorted(maps.Keys(known)); !slices.Equal(lua, got) {
			t.Errorf("%s replies with %q; its decoder's cases are %q", name, lua, got)
		}
	}
	if len(replyWords(mustRead("lua/begin.lua"))) < 7 {
		t.Errorf("begin.lua: found only the reply words %q", replyWords(mustRead("lua/begin.lua")))
	}
}

var (
	luaRead     = regexp.MustCompile(`redis\.call\(\s*"HMGET"|\bstep_get\(`)
	luaReadList = regexp.MustCompile(`"HMGET"[^)]*\bunpack\((\w+)\)`)
)

// stripReads blanks out what the scripts read, so that the field names of a
// read ("status", "current", ...) are not taken for a field and its value:
// each HMGET and step_get call, and each table of field names an HMGET
// unpacks.
func stripReads(src string) string {
	cut := func(src string, open int, o, c byte) string {
		depth := 0
		for i := open; i < len(src); i++ {
			switch src[i] {
			case o:
				depth++
			case c:
				depth--
				if depth == 0 {
					return src[:open] + strings.Repeat(" ", i+1-open) + src[i+1:]
				}
			}
		}
		return src[:open]
	}
	for _, m := range luaReadList.FindAllStringSubmatch(src, -1) {
		re := regexp.MustCompile(`local\s+` + m[1] + `\s*=\s*\{`)
		for loc := re.FindStringIndex(src); loc != nil; loc = re.FindStringIndex(src) {
			src = src[:loc[0]] + strings.Repeat(" ", loc[1]-1-loc[0]) + cut(src[loc[1]-1:], 0, '{', '}')
		}
	}
	for loc := luaRead.FindStringIndex(src); loc != nil; loc = luaRead.FindStringIndex(src) {
		open := strings.IndexByte(src[loc[0]:], '(') + loc[0]
		src = src[:loc[0]] + strings.Repeat(" ", open-loc[0]) + cut(src[open:], 0, '(', ')')
	}
	return src
}

// Where the scripts write or compare a state: a step's or the run's
// "status" field and its value, a "retry_state" field and its value, the
// statuses given to set_status (old, new) and status_move (leave, old, new),
// and a comparison of a variable named for a status.
var (
	luaStatusField  = regexp.MustCompile(`"status"\s*,\s*"(\w+)"`)
	luaRetryField   = regexp.MustCompile(`"retry_state"\s*,\s*"(\w+)"`)
	luaSetStatus    = regexp.MustCompile(`\bset_status\(\s*([^,()]+)\s*,\s*([^,()]+)`)
	luaStatusMove   = regexp.MustCompile(`\bstatus_move\(\s*[^,()]+\s*,\s*([^,()]+)\s*,\s*([^,()]+)`)
	luaStatusCompar = regexp.MustCompile(`\b\w*status\s*[=~]=\s*"(\w+)"`)
	luaQuoted       = regexp.MustCompile(`^"(\w+)"$`)
)

// luaStates are the state literals of a script.
type luaStates struct {
	fields   []string // the values written to a "status" field (of the run or a step)
	retries  []string // the values written to a "retry_state" field
	runs     []string // the run statuses given to set_status or status_move
	compared []string // the literals a status variable is compared with
}

// scanLuaStates finds the state literals of a script.
func scanLuaStates(src string) luaStates {
	src = stripReads(stripLuaComments(src))
	var st luaStates
	for _, m := range luaStatusField.FindAllStringSubmatch(src, -1) {
		st.fields = append(st.fields, m[1])
	}
	for _, m := range luaRetryField.FindAllStringSubmatch(src, -1) {
		st.retries = append(st.retries, m[1])
	}
	for _, re := range []*regexp.Regexp{luaSetStatus, luaStatusMove} {
		for _, m := range re.FindAllStringSubmatch(src, -1) {
			for _, arg := range m[1:] {
				if q := luaQuoted.FindStringSubmatch(strings.TrimSpace(arg)); q != nil {
					st.runs = append(st.runs, q[1])
				}
			}
		}
	}
	for _, m := range luaStatusCompar.FindAllStringSubmatch(src, -1) {
		st.compared = append(st.compared, m[1])
	}
	return st
}

// TestScanLuaStates: the scan finds the literals of writes and comparisons,
// and not the field names of reads.
func TestScanLuaStates(t *testing.T) {
	t.Parallel()
	got := scanLuaStates(`
local v = redis.call("HMGET", RUN, "status", "current", sp(idx) .. "retry_state", "optional")
local f = {"status", "name"}
local r = redis.call("HMGET", RUN, unpack(f))
local s = step_get(idx, "status", "task")
-- step_set(idx, "status", "commented")
step_set(idx, "status", "paused", "retry_state", "later")
set_status(rs[1], "archived", nil, "failure_code", "x")
status_move(leave, "paused", to, v[4])
if st_status == "waiting" or status ~= "held" then
`)
	want := luaStates{fields: []string{"paused"}, retries: []string{"later"}, runs: []string{"archived", "paused"},
		compared: []string{"waiting", "held"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("scan: %+v\nwant  %+v", got, want)
	}
}

// TestLuaStatusLiterals: every run status, step status and retry state the
// scripts write or test for is a constant of states.go, and each constant is
// written by some script.
func TestLuaStatusLiterals(t *testing.T) {
	t.Parallel()
	runs := map[string]bool{}
	for _, s := range []RunStatus{StatusPending, StatusRunning, StatusSucceeded, StatusFailed, StatusCancelled,
		StatusCompensating, StatusCompensated} {
		runs[string(s)] = true
	}
	steps := map[string]bool{}
	for _, s := range []StepStatus{StepPending, StepRunning, StepSucceeded, StepFailed, StepSkipped, StepCancelled,
		StepWaiting, StepCompensated, StepRolledBack} {
		steps[string(s)] = true
	}
	retries := map[string]bool{}
	for _, s := range []RetryState{RetryNone, RetryScheduled, RetryExhausted} {
		retries[string(s)] = true
	}
	written := map[string]bool{}   // run or step statuses written to a status field
	runWrites := map[string]bool{} // run statuses given to set_status/status_move
	retryWrites := map[string]bool{}
	for f, src := range luaSources(t) {
		st := scanLuaStates(src)
		for _, v := range st.fields {
			if !runs[v] && !steps[v] {
				t.Errorf("%s writes the status %q: not a RunStatus or StepStatus", f, v)
			}
			written[v] = true
		}
		for _, v := range st.retries {
			if !retries[v] {
				t.Errorf("%s writes the retry state %q: not a RetryState", f, v)
			}
			retryWrites[v] = true
		}
		for _, v := range st.runs {
			if !runs[v] {
				t.Errorf("%s sets the run status %q: not a RunStatus", f, v)
			}
			runWrites[v] = true
		}
		for _, v := range st.compared {
			if !runs[v] && !steps[v] {
				t.Errorf("%s compares a status with %q: not a RunStatus or StepStatus", f, v)
			}
		}
	}
	for s := range steps {
		if !written[s] {
			t.Errorf("no script writes the step status %q", s)
		}
	}
	for s := range runs {
		if !written[s] && !runWrites[s] {
			t.Errorf("no script writes the run status %q", s)
		}
	}
	for s := range retries {
		if !retryWrites[s] {
			t.Errorf("no script writes the retry state %q", s)
		}
	}
	if len(runWrites) < 3 {
		t.Errorf("found only the run statuses %v given to set_status/status_move", runWrites)
	}
}
