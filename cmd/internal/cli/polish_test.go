package cli_test

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cairnhq/cairn/workflow"
)

var sgr = regexp.MustCompile("\x1b\\[[0-9;]*m")

// TestColourOnlyOnATerminal: statuses are coloured when stdout is a
// terminal, unless --no-color (before the command or among its flags),
// NO_COLOR (not empty) or TERM=dumb says no; never when it is not one.
func TestColourOnlyOnATerminal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(fastPolicy())
	id := runID(t, e.run("start", "demo", "--wait"))
	for _, tc := range []struct {
		name    string
		tty     bool
		args    []string
		environ []string
		colour  bool
	}{
		{"terminal", true, []string{"list"}, nil, true},
		{"terminal, NO_COLOR empty", true, []string{"list"}, []string{"NO_COLOR="}, true},
		{"not a terminal", false, []string{"list"}, nil, false},
		{"--no-color first", true, []string{"--no-color", "list"}, nil, false},
		{"--no-color among the flags", true, []string{"list", "--no-color"}, nil, false},
		{"NO_COLOR", true, []string{"list"}, []string{"NO_COLOR=1"}, false},
		{"TERM=dumb", true, []string{"list"}, []string{"TERM=dumb"}, false},
		{"status on a terminal", true, []string{"status", id}, nil, true},
		{"status --no-color", true, []string{"status", id, "--no-color"}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.invoke(invocation{args: tc.args, tty: tc.tty, environ: e.environ(tc.environ...)})
			mustSucceed(t, r)
			if got := strings.Contains(r.stdout, "\x1b[32msucceeded\x1b[0m"); got != tc.colour {
				t.Errorf("coloured %v, want %v:\n%q", got, tc.colour, r.stdout)
			}
			if !tc.colour && sgr.MatchString(r.stdout) {
				t.Errorf("an escape sequence without colour:\n%q", r.stdout)
			}
			if !strings.Contains(sgr.ReplaceAllString(r.stdout, ""), id) {
				t.Errorf("no run %s in\n%s", id, r.stdout)
			}
		})
	}
}

// TestTablesFitTheTerminal: on a terminal ($COLUMNS standing in for its
// width) the steps table's last error is cut to fit; piped, it is cut at
// 60 characters as before.
func TestTablesFitTheTerminal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(fastPolicy())
	id := runID(t, e.run("start", "demo", "--wait", "--input", `{"fail_step":"fetch","permanent":true}`))
	errorCell := func(out string) string {
		for l := range strings.SplitSeq(out, "\n") {
			if _, errCell, ok := strings.Cut(l, "  fetch: "); ok && strings.HasPrefix(l, "fetch ") {
				return "fetch: " + errCell
			}
		}
		t.Fatalf("no fetch row in\n%s", out)
		return ""
	}
	piped := e.invoke(invocation{args: []string{"status", id}, environ: e.environ("COLUMNS=200")})
	mustSucceed(t, piped)
	full := e.get(id).Step("fetch").LastError
	if got := errorCell(piped.stdout); utf8.RuneCountInString(got) > 60 {
		t.Errorf("piped: the error cell has %d runes, want at most 60: %q", utf8.RuneCountInString(got), got)
	}
	for _, cols := range []int{100, 300} {
		r := e.invoke(invocation{args: []string{"status", id, "--no-color"}, tty: true,
			environ: e.environ("COLUMNS=" + strconv.Itoa(cols))})
		mustSucceed(t, r)
		for l := range strings.SplitSeq(strings.TrimSuffix(r.stdout, "\n"), "\n") {
			if strings.HasPrefix(l, "fetch ") && utf8.RuneCountInString(l) > cols-1 {
				t.Errorf("COLUMNS=%d: a row of %d runes: %q", cols, utf8.RuneCountInString(l), l)
			}
		}
		if cols == 300 && errorCell(r.stdout) != full {
			t.Errorf("COLUMNS=300: the error %q is cut: %q", full, errorCell(r.stdout))
		}
	}
}

func TestVersionAndGlobalFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--version"}, {"-version"}, {"--no-color", "--version"}} {
		r := invoke(t, invocation{args: args})
		mustSucceed(t, r)
		if !regexp.MustCompile(`^enqueue \S+ \(go\S+ \w+/\w+\)\n$`).MatchString(r.stdout) || r.stderr != "" {
			t.Errorf("%v: %v", args, r)
		}
	}
	checkOneErrorLine(t, invoke(t, invocation{args: []string{"--version", "list"}}), 2, "--version takes no argument")
	checkOneErrorLine(t, invoke(t, invocation{args: []string{"--bogus"}}), 2, `unknown flag "--bogus"`)
	checkOneErrorLine(t, invoke(t, invocation{args: []string{"--no-color", "frobnicate"}}), 2, `unknown command "frobnicate"`)
	// --help, anywhere, exits 0 with the usage on stdout.
	for _, args := range [][]string{{"--help"}, {"--no-color", "--help"}, {"list", "--help"}} {
		r := invoke(t, invocation{args: args})
		mustSucceed(t, r)
		if !strings.HasPrefix(r.stdout, "Usage: enqueue ") || r.stderr != "" {
			t.Errorf("%v: %v", args, r)
		}
	}
	r := invoke(t, invocation{args: []string{"help"}})
	for _, s := range []string{"--no-color", "--version", "NO_COLOR", "--last", "a prefix of it"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("help lacks %q", s)
		}
	}
}

// completions runs "enqueue __complete args..." (what the shells' scripts
// run) and returns its answers, one "value\tdescription" each, and the
// directive.
func completions(t *testing.T, environ []string, args ...string) (answers []string, directive string) {
	t.Helper()
	r := invoke(t, invocation{args: append([]string{"__complete"}, args...), environ: environ})
	mustSucceed(t, r)
	out := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(out) == 0 || !strings.HasPrefix(out[len(out)-1], ":") {
		t.Fatalf("__complete %q: no directive line:\n%s", args, r.stdout)
	}
	return out[:len(out)-1], out[len(out)-1]
}

// values returns the values of completion answers, without their
// descriptions.
func values(answers []string) string {
	var out []string
	for _, a := range answers {
		v, _, _ := strings.Cut(a, "\t")
		out = append(out, v)
	}
	return strings.Join(out, " ")
}

// TestCompletionScripts: completion writes cobra's script for each shell,
// with our header, calling back enqueue __complete; it needs no
// configuration.
func TestCompletionScripts(t *testing.T) {
	t.Parallel()
	for shell, marker := range map[string]string{
		"bash":       "complete -o default -F __start_enqueue enqueue",
		"zsh":        "compdef _enqueue enqueue",
		"fish":       "complete -c enqueue ",
		"powershell": "Register-ArgumentCompleter -CommandName 'enqueue'",
	} {
		// A bad configuration does not stop it: it needs none.
		r := invoke(t, invocation{args: []string{"completion", shell}, environ: []string{"CAIRN_QUEUE=bad queue{"}})
		mustSucceed(t, r)
		for _, s := range []string{"completion for enqueue, Cairn's CLI (written by: enqueue completion " + shell + ")",
			"__complete", marker} {
			if !strings.Contains(r.stdout, s) {
				t.Errorf("%s script lacks %q", shell, s)
			}
		}
		if shell == "zsh" && (!strings.HasPrefix(r.stdout, "#compdef enqueue\n") || strings.Count(r.stdout, "#compdef") != 1) {
			t.Errorf("zsh script does not start with one #compdef line:\n%.200s", r.stdout)
		}
	}
	checkOneErrorLine(t, invoke(t, invocation{args: []string{"completion", "tcsh"}}), 2,
		`unknown shell "tcsh": want bash, zsh, fish or powershell`)
	checkOneErrorLine(t, invoke(t, invocation{args: []string{"completion"}}), 2, "completion: missing shell")
}

// TestCompletionStatic: commands, flags and fixed values complete without
// Redis.
func TestCompletionStatic(t *testing.T) {
	t.Parallel()
	environ := []string{"CAIRN_REDIS_URL=redis://127.0.0.1:1"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"st"}, "start status"},
		{[]string{"--no-color", "sta"}, "start status"},
		{[]string{"--v"}, "--version"},
		{[]string{"status", "--l"}, "--last"},
		{[]string{"list", "--status", "c"}, "cancelled compensating compensated"},
		{[]string{"retry", "01kabc", "--"}, "--no-color --help --json --last --now --step --wait"},
		{[]string{"completion", ""}, "bash zsh fish powershell"},
		{[]string{"help", "ca"}, "cancel"},
		{[]string{"breaker", ""}, "reset"},
		{[]string{"start", "--idempotency-key", ""}, ""},
		{[]string{"list", "--input", ""}, "input."},
		{[]string{"list", "--input", "inp"}, "input."},
		{[]string{"list", "--since", ""}, "1h 24h 7d 30d"},
		{[]string{"list", "--until", "2"}, "24h"},
	} {
		answers, _ := completions(t, environ, tc.args...)
		if got := values(answers); got != tc.want {
			t.Errorf("completing %q: %q, want %q", tc.args, got, tc.want)
		}
	}
	answers, _ := completions(t, environ, "s")
	if !slices.Contains(answers, "start\t"+"start a run of a workflow and print its ID") {
		t.Errorf("commands complete without their summaries: %q", answers)
	}
	// validate completes files (directive 0, the default), other
	// arguments do not (4, no file completion).
	if _, d := completions(t, environ, "validate", ""); d != ":0" {
		t.Errorf("validate: directive %s, want :0 (files)", d)
	}
	if _, d := completions(t, environ, "list", ""); d != ":4" {
		t.Errorf("list: directive %s, want :4 (no files)", d)
	}
	// list --input's "input." leaves the cursor after the dot (6: no
	// files, no space); start --input still completes files.
	if _, d := completions(t, environ, "list", "--input", ""); d != ":6" {
		t.Errorf("list --input: directive %s, want :6", d)
	}
	if _, d := completions(t, environ, "start", "demo", "--input", ""); d != ":0" {
		t.Errorf("start --input: directive %s, want :0 (files)", d)
	}
}

// TestCompletionDynamic: run IDs complete from the queue's newest runs,
// workflow names from its workers' definitions, breaker names from its
// breakers; an unreachable Redis or a bad configuration completes nothing,
// promptly and silently.
func TestCompletionDynamic(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(fastPolicy())
	first := runID(t, e.run("start", "demo", "--wait"))
	second := runID(t, e.run("start", "demo"))

	answers, _ := completions(t, e.environ(), "start", "")
	if values(answers) != "demo" || !strings.Contains(answers[0], "steps: ") {
		t.Errorf("start: workflows %q, want demo with its steps", answers)
	}
	if answers, _ := completions(t, e.environ(), "start", "zz"); len(answers) != 0 {
		t.Errorf("start zz: %q, want none", answers)
	}
	for _, cmd := range []string{"status", "events", "cancel", "recover", "retry", "skip", "signal"} {
		answers, _ := completions(t, e.environ(), cmd, "")
		if got, want := values(answers), second+" "+first; got != want {
			t.Errorf("%s: run IDs %q, want the newest first %q", cmd, got, want)
		}
	}
	if answers, _ := completions(t, e.environ(), "list", "--id-prefix", ""); values(answers) != second+" "+first {
		t.Errorf("list --id-prefix: run IDs %q, want the newest first", answers)
	}
	answers, _ = completions(t, e.environ(), "status", "")
	if len(answers) != 2 || !strings.Contains(answers[1], "\tdemo succeeded, ") {
		t.Errorf("status: %q, want the runs described by workflow, status and age", answers)
	}
	answers, _ = completions(t, e.environ(), "cancel", first[:20])
	if values(answers) != first {
		t.Errorf("cancel %s: %q, want %s", first[:20], answers, first)
	}
	answers, _ = completions(t, e.environ(), "events", strings.ToLower(second[:24]))
	if values(answers) != second {
		t.Errorf("events with a lower-case prefix: %q, want %s", answers, second)
	}
	for _, args := range [][]string{{"status", "--last", ""}, {"status", first, ""}, {"signal", first, ""}} {
		if answers, _ := completions(t, e.environ(), args...); len(answers) != 0 {
			t.Errorf("%q: %q, want nothing", args, answers)
		}
	}
	// retry --step offers the run's failed steps; skip only optional ones.
	failed := runID(t, e.run("start", "demo", "--input", `{"fail_step":"transform","permanent":true}`))
	e.waitStatus(failed, workflow.StatusFailed)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"retry", failed, "--step", ""}, "transform"},
		{[]string{"retry", "--last", "--step", "tr"}, "transform"},
		{[]string{"retry", failed[:12], "--step", ""}, "transform"},
		{[]string{"retry", failed, "--step", "x"}, ""},
		{[]string{"skip", failed, "--step", ""}, ""},
		{[]string{"retry", first, "--step", ""}, ""},
		{[]string{"retry", "--step", ""}, ""},
	} {
		answers, _ := completions(t, e.environ(), tc.args...)
		if got := values(answers); got != tc.want {
			t.Errorf("completing %q: %q, want %q", tc.args, got, tc.want)
		}
	}

	// Another queue's runs are not offered.
	if answers, _ := completions(t, []string{"CAIRN_REDIS_URL=" + e.url, "CAIRN_QUEUE=" + e.queue + "-other"},
		"status", ""); len(answers) != 0 {
		t.Errorf("another queue: %q, want nothing", answers)
	}

	for name, environ := range map[string][]string{
		"unreachable Redis": {"CAIRN_REDIS_URL=redis://127.0.0.1:1"},
		"bad configuration": {"CAIRN_REDIS_URL=" + e.url, "CAIRN_QUEUE=bad queue{"},
	} {
		began := time.Now()
		r := invoke(t, invocation{args: []string{"__complete", "status", ""}, environ: environ})
		if r.code != 0 || r.stdout != ":4\n" || strings.Contains(r.stderr, "enqueue:") {
			t.Errorf("%s: %v, want no answers and no error", name, r)
		}
		if took := time.Since(began); took > 10*time.Second {
			t.Errorf("%s: took %v", name, took)
		}
	}
}
