package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const validWorkflows = `workflows:
  sync-invoices:
    resiliency:
      retry: {max_attempts: 5, backoff: exponential, initial_delay: 1s, max_delay: 30s, jitter: equal}
    steps:
      - name: fetch
        type: http
        with: {method: GET, url: "https://billing.internal/invoices?since={{.input.since}}"}
  ping:
    steps:
      - {name: ping, type: http, with: {method: GET, url: "https://example.com/"}}
`

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// unreachableRedis is an environment whose Redis does not exist: validate
// must not need it.
var unreachableRedis = []string{"CAIRN_REDIS_URL=redis://127.0.0.1:1/0"}

func TestValidateOK(t *testing.T) {
	t.Parallel()
	path := writeFile(t, "workflows.yaml", validWorkflows)
	r := invoke(t, invocation{args: []string{"validate", path}, environ: unreachableRedis})
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("want exit 0 and no stderr, got %v", r)
	}
	if want := path + ": ok (2 workflows: sync-invoices, ping)\n"; r.stdout != want {
		t.Errorf("stdout %q, want %q", r.stdout, want)
	}
	one := writeFile(t, "one.yaml", "workflows:\n  a:\n    steps: [{name: s, type: http, with: {method: GET, url: 'http://x'}}]\n")
	r = invoke(t, invocation{args: []string{"validate", one}, environ: unreachableRedis})
	if r.code != 0 || r.stdout != one+": ok (1 workflow: a)\n" {
		t.Errorf("one workflow: %v", r)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	t.Parallel()
	path := writeFile(t, "bad.yaml", `workflows:
  sync-invoices:
    resiliency:
      retry: {max_atempts: 5, initial_delay: soon}
    steps:
      - name: fetch
        type: htp
      - name: fetch
        type: http
        with: {method: GET, url: "https://x/{{.input.since"}
`)
	r := invoke(t, invocation{args: []string{"validate", path}, environ: unreachableRedis})
	if r.code != 1 || r.stdout != "" {
		t.Fatalf("want exit 1 and no stdout, got %v", r)
	}
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	want := []string{
		path + `:4:15: workflow "sync-invoices": resiliency.retry: unknown key "max_atempts" (did you mean "max_attempts"?)`,
		path + `:4:46: workflow "sync-invoices": resiliency.retry.initial_delay: "soon" is not a duration`,
		path + `:7:15: workflow "sync-invoices": step "fetch": unknown step type "htp" (want one of await, http, sleep)`,
		path + `:8:15: workflow "sync-invoices": duplicate step name "fetch" (first at line 6)`,
		path + `:10:34: workflow "sync-invoices": step "fetch": with.url: template: url:1: unclosed action`,
		"enqueue: " + path + ": 5 problems",
	}
	if len(lines) != len(want) {
		t.Fatalf("stderr has %d lines, want %d:\n%s", len(lines), len(want), r.stderr)
	}
	for i := range want {
		if !strings.HasPrefix(lines[i], want[i]) {
			t.Errorf("line %d:\n got %s\nwant %s...", i+1, lines[i], want[i])
		}
	}
}

// TestValidateUsesTheEnvironment: the worker's defaults take part in the
// check (an initial_delay above CAIRN_RETRY_MAX_INTERVAL), and a bad
// variable is a configuration error, as for every command.
func TestValidateUsesTheEnvironment(t *testing.T) {
	t.Parallel()
	path := writeFile(t, "slow.yaml", `workflows:
  slow:
    resiliency: {retry: {initial_delay: 1m}}
    steps: [{name: s, type: http, with: {method: GET, url: "http://x"}}]
`)
	r := invoke(t, invocation{args: []string{"validate", path}, environ: unreachableRedis})
	if r.code != 1 || !strings.Contains(r.stderr, path+":3:17: ") || !strings.Contains(r.stderr, "max_interval 30s is shorter than initial_interval 1m0s") {
		t.Errorf("initial_delay above the default max: %v", r)
	}
	r = invoke(t, invocation{args: []string{"validate", path},
		environ: append([]string{"CAIRN_RETRY_MAX_INTERVAL=5m"}, unreachableRedis...)})
	if r.code != 0 {
		t.Errorf("with CAIRN_RETRY_MAX_INTERVAL=5m: %v", r)
	}
	r = invoke(t, invocation{args: []string{"validate", path}, environ: []string{"CAIRN_RETRY_JITTER=sometimes"}})
	checkOneErrorLine(t, r, 2, "CAIRN_RETRY_JITTER")
}

func TestValidateUsageErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	type usageCase struct {
		name string
		args []string
		msg  string
	}
	tests := []usageCase{
		{"no file", []string{"validate"}, "validate: missing file (usage: enqueue validate <file>)"},
		{"two files", []string{"validate", "a.yaml", "b.yaml"}, `validate: unexpected argument "b.yaml"`},
		{"unknown flag", []string{"validate", "--strict", "a.yaml"}, `validate: unknown flag "--strict"`},
		{"missing file", []string{"validate", filepath.Join(dir, "nope.yaml")}, "no such file or directory"},
		{"a directory", []string{"validate", dir}, "enqueue: validate: " + dir + " is a directory, not a regular file"},
	}
	// Anything but a regular file is refused at once: a named pipe would
	// wait for a writer, /dev/zero never end.
	for path, kind := range specialFiles(t) {
		tests = append(tests, usageCase{"special file " + filepath.Base(path), []string{"validate", path},
			"enqueue: validate: " + path + " is " + kind + ", not a regular file"})
	}
	// Over the worker's limit: refused without being parsed.
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, make([]byte, 8<<20+1), 0o600); err != nil {
		t.Fatal(err)
	}
	tests = append(tests, usageCase{"over 8 MiB", []string{"validate", big}, "enqueue: validate: " + big + ": file larger than 8388608 bytes"})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := invokePromptly(t, invocation{args: tt.args, environ: unreachableRedis}, nil)
			checkOneErrorLine(t, r, 2, tt.msg)
		})
	}
	r := invoke(t, invocation{args: []string{"help", "validate"}})
	if r.code != 0 || !strings.HasPrefix(r.stdout, "Usage: enqueue validate <file>") {
		t.Errorf("help validate: %v", r)
	}
}
