package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
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

func TestCompletion(t *testing.T) {
	t.Parallel()
	commands := []string{"start", "status", "list", "events", "cancel", "recover", "retry", "skip", "signal", "key",
		"breakers", "breaker", "outbox", "validate", "completion", "help"}
	scripts := map[string]string{}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		// A bad configuration does not stop it: it needs none.
		r := invoke(t, invocation{args: []string{"completion", shell}, environ: []string{"CAIRN_QUEUE=bad queue{"}})
		mustSucceed(t, r)
		flag := "--" // fish: -l name
		if shell == "fish" {
			flag = "-l "
		}
		for _, s := range append(slices.Clone(commands), flag+"idempotency-key", flag+"last", flag+"no-color",
			flag+"version", "compensating") {
			if !strings.Contains(r.stdout, s) {
				t.Errorf("%s script lacks %q", shell, s)
			}
		}
		scripts[shell] = r.stdout
	}
	checkOneErrorLine(t, invoke(t, invocation{args: []string{"completion", "tcsh"}}), 2, `unknown shell "tcsh": want bash, zsh or fish`)
	checkOneErrorLine(t, invoke(t, invocation{args: []string{"completion"}}), 2, "completion: missing shell")

	dir := t.TempDir()
	for shell, script := range scripts {
		if err := os.WriteFile(filepath.Join(dir, shell), []byte(script), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The scripts parse, in the shells that are installed.
	for shell, check := range map[string][]string{"bash": {"-n"}, "zsh": {"-n"}, "fish": {"--no-execute"}} {
		path, err := exec.LookPath(shell)
		if err != nil {
			t.Errorf("%s is not installed, and its completion script must be checked: apt-get install -y %s", shell, shell)
			continue
		}
		if out, err := exec.Command(path, append(check, filepath.Join(dir, shell))...).CombinedOutput(); err != nil {
			t.Errorf("%s %v: %v\n%s", shell, check, err, out)
		}
	}
	// fish completes commands, flags and values (fish's absence failed above).
	if fish, err := exec.LookPath("fish"); err == nil {
		for line, want := range map[string]string{
			"enqueue st": "start\t" + "start a run of a workflow and print its ID\n" +
				"status\t" + "show a run and the progress of its steps",
			"enqueue list --status comp": "compensated\tonly runs in status S\ncompensating\tonly runs in status S",
			"enqueue completion ":        "bash\nfish\nzsh",
		} {
			out, err := exec.Command(fish, "--no-config", "-c", "source "+filepath.Join(dir, "fish")+"; complete -C '"+line+"'").CombinedOutput()
			if got := strings.TrimSpace(string(out)); err != nil || got != want {
				t.Errorf("fish completing %q: %v\n%q, want\n%q", line, err, got, want)
			}
		}
	}
	// bash completes commands, flags and values.
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal("bash is not installed: apt-get install -y bash")
	}
	for _, tc := range []struct {
		words []string
		want  string
	}{
		{[]string{"enqueue", "st"}, "start status"},
		{[]string{"enqueue", "--no-color", "sta"}, "start status"},
		{[]string{"enqueue", "--v"}, "--version"},
		{[]string{"enqueue", "status", "--l"}, "--last"},
		{[]string{"enqueue", "list", "--status", "c"}, "cancelled compensating compensated"},
		{[]string{"enqueue", "retry", "01kabc", "--"}, "--step --last --wait --json --no-color --help"},
		{[]string{"enqueue", "completion", ""}, "bash zsh fish"},
		{[]string{"enqueue", "help", "ca"}, "cancel"},
		{[]string{"enqueue", "start", "--idempotency-key", ""}, ""},
	} {
		var words []string
		for _, w := range tc.words {
			words = append(words, "'"+w+"'")
		}
		prog := "source " + filepath.Join(dir, "bash") + "\nCOMP_WORDS=(" + strings.Join(words, " ") + ")\n" +
			"COMP_CWORD=" + strconv.Itoa(len(tc.words)-1) + "\n_enqueue\necho \"${COMPREPLY[*]}\"\n"
		out, err := exec.Command(bash, "--norc", "--noprofile", "-c", prog).CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v\n%s", err, out)
		}
		if got := strings.TrimSpace(string(out)); got != tc.want {
			t.Errorf("completing %q: %q, want %q", tc.words, got, tc.want)
		}
	}
}
