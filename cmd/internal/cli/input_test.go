package cli_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// inputLimit is the documented limit of a run's input: 1 MiB.
const inputLimit = 1 << 20

// refusedRedis is an environment whose Redis refuses connections at once:
// input the CLI accepts ends in "cannot reach Redis" (exit 1), input it
// refuses in exit 2 before any connection.
func refusedRedis(t *testing.T) []string {
	t.Helper()
	return []string{"CAIRN_REDIS_URL=redis://" + testkit.FreeAddr(t)}
}

// specialFiles makes a named pipe, a socket and a directory in a temporary
// directory and returns them, with /dev/zero, by what the CLI calls them.
func specialFiles(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link-to-fifo")
	if err := os.Symlink(fifo, link); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	sub := filepath.Join(dir, "dir")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		fifo:        "a named pipe (FIFO)",
		link:        "a named pipe (FIFO)",
		sock:        "a socket",
		sub:         "a directory",
		"/dev/zero": "a character device",
	}
}

// TestInputFileMustBeRegular: --input @path refuses at once, with exit 2,
// anything but a regular file: reading a named pipe would wait for a
// writer, /dev/zero would never end.
func TestInputFileMustBeRegular(t *testing.T) {
	t.Parallel()
	environ := refusedRedis(t)
	for path, kind := range specialFiles(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			t.Parallel()
			r := invokePromptly(t, invocation{args: []string{"start", "demo", "--input", "@" + path}, environ: environ}, nil)
			checkOneErrorLine(t, r, 2, fmt.Sprintf("enqueue: --input @%s: %s is %s, not a regular file", path, path, kind))
		})
	}
}

// TestInputSizeLimit: the input is at most 1 MiB, whitespace included,
// from a file or stdin; more is refused with exit 2, reading one byte past
// the limit at most.
func TestInputSizeLimit(t *testing.T) {
	t.Parallel()
	environ := refusedRedis(t)
	dir := t.TempDir()
	atLimit := `"` + strings.Repeat("x", inputLimit-2) + `"`
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	exact := write("exact.json", atLimit)
	over := write("over.json", atLimit+"\n")
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(exact, link); err != nil {
		t.Fatal(err)
	}

	// Accepted: the CLI goes on to connect.
	for _, tc := range []struct {
		name  string
		input string
		stdin string
	}{
		{"file at the limit", "@" + exact, ""},
		{"symbolic link to a regular file", "@" + link, ""},
		{"stdin at the limit", "@-", atLimit},
	} {
		r := invokePromptly(t, invocation{args: []string{"start", "demo", "--input", tc.input}, stdin: tc.stdin,
			environ: environ}, nil)
		if r.code != 1 || !strings.HasPrefix(r.stderr, "enqueue: cannot reach Redis") {
			t.Errorf("%s: want the input accepted and exit 1 for the unreachable Redis, got %v", tc.name, r)
		}
	}

	r := invokePromptly(t, invocation{args: []string{"start", "demo", "--input", "@" + over}, environ: environ}, nil)
	checkOneErrorLine(t, r, 2, "enqueue: --input @"+over+": input larger than 1048576 bytes")

	// Endless stdin: refused after limit+1 bytes.
	zeros := &countingReader{}
	r = invokePromptly(t, invocation{args: []string{"start", "demo", "--input", "@-"}, environ: environ}, zeros)
	checkOneErrorLine(t, r, 2, "enqueue: --input @- (stdin): input larger than 1048576 bytes")
	if n := zeros.read(); n > inputLimit+1 {
		t.Errorf("read %d bytes of stdin, want at most %d", n, inputLimit+1)
	}
}

// countingReader is an endless stream of spaces that counts the bytes read.
type countingReader struct {
	mu sync.Mutex
	n  int
}

func (r *countingReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	r.mu.Lock()
	r.n += len(p)
	r.mu.Unlock()
	return len(p), nil
}

func (r *countingReader) read() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// blockedReader blocks every Read until closed, as a terminal or a pipe
// nobody writes to does; reading tells when the first Read began.
type blockedReader struct {
	reading chan struct{}
	once    sync.Once
	closed  chan struct{}
	close   sync.Once
}

func newBlockedReader(t *testing.T) *blockedReader {
	r := &blockedReader{reading: make(chan struct{}), closed: make(chan struct{})}
	t.Cleanup(func() { r.close.Do(func() { close(r.closed) }) })
	return r
}

func (r *blockedReader) Read([]byte) (int, error) {
	r.once.Do(func() { close(r.reading) })
	<-r.closed
	return 0, io.EOF
}

// TestStdinReadStopsWhenInterrupted: --input @- stops reading when the
// context is cancelled (SIGINT or SIGTERM in the binary), with exit 1 and
// no run started, instead of waiting for stdin to end.
func TestStdinReadStopsWhenInterrupted(t *testing.T) {
	t.Parallel()
	stdin := newBlockedReader(t)
	ctx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	go func() {
		<-stdin.reading
		interrupt()
	}()
	r := invokePromptly(t, invocation{ctx: ctx, args: []string{"start", "demo", "--input", "@-"}, environ: refusedRedis(t)}, stdin)
	checkOneErrorLine(t, r, 1, "enqueue: interrupted while reading --input @- (stdin): no run was started")
}

// TestAmbiguousJSONRefused: --input and --payload that readers take
// differently (invalid UTF-8, a lone surrogate, a duplicate key) are
// refused with exit 2, saying where, before Redis is reached; from a file,
// the offset counts from the file's start.
func TestAmbiguousJSONRefused(t *testing.T) {
	t.Parallel()
	environ := refusedRedis(t)
	file := filepath.Join(t.TempDir(), "input.json")
	if err := os.WriteFile(file, []byte("\n  {\"a\": 1, \"a\": 2}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	runID := workflow.NewRunID(time.Now())
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"start", "demo", "--input", `{"user": {"name": "a", "name": "b"}}`},
			`enqueue: --input: user.name: duplicate key "name" at byte 23`},
		{[]string{"start", "demo", "--input", "{\"n\": \"\xff\"}"}, `enqueue: --input: n: invalid UTF-8 in a string (byte 0xff) at byte 7`},
		{[]string{"start", "demo", "--input", `["\ud800"]`}, `enqueue: --input: [0]: lone surrogate \ud800 in a string at byte 2`},
		{[]string{"start", "demo", "--input", "@" + file}, `enqueue: --input @` + file + `: a: duplicate key "a" at byte 12`},
		{[]string{"signal", runID, "go", "--payload", `{"ok": true, "ok": false}`},
			`enqueue: --payload: ok: duplicate key "ok" at byte 13`},
		{[]string{"signal", runID, "go", "--payload", `"\udfff"`}, `enqueue: --payload: lone surrogate \udfff in a string at byte 1`},
	} {
		r := invokePromptly(t, invocation{args: c.args, environ: environ}, nil)
		checkOneErrorLine(t, r, 2, c.want)
	}
}
