package outbox_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cairnhq/cairn/internal/outbox"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func open(t *testing.T, path string, o outbox.Options) *outbox.Box {
	t.Helper()
	b, err := outbox.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func values(t *testing.T, items []outbox.Item) []string {
	t.Helper()
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = string(it.Value)
	}
	return out
}

func TestOrderSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "outbox.db")
	b := open(t, path, outbox.Options{})
	for i := range 5 {
		if _, err := b.Append(fmt.Appendf(nil, "e%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	first, ok, err := b.First()
	if err != nil || !ok || string(first.Value) != "e0" {
		t.Fatalf("First = %q, %v, %v; want e0", first.Value, ok, err)
	}
	if err := b.Delete(first.Seq, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = open(t, path, outbox.Options{})
	q, err := b.Queued()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(values(t, q), ","); got != "e1,e2,e3,e4" {
		t.Fatalf("after reopen: %s", got)
	}
	// Sequence numbers never go back, even after the head was deleted.
	seq, err := b.Append([]byte("e5"))
	if err != nil {
		t.Fatal(err)
	}
	if seq <= q[len(q)-1].Seq {
		t.Fatalf("new seq %d not after %d", seq, q[len(q)-1].Seq)
	}
	st, err := b.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := b.Len(); st.Entries != 5 || st.Bytes != 10 || n != 5 {
		t.Fatalf("stats %+v; want 5 entries of 10 bytes", st)
	}
}

func TestFull(t *testing.T) {
	b := open(t, filepath.Join(t.TempDir(), "o"), outbox.Options{MaxEntries: 2, MaxBytes: 10})
	for _, v := range []string{"aaaa", "bbbb"} {
		if _, err := b.Append([]byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	_, err := b.Append([]byte("c"))
	if !errors.Is(err, outbox.ErrFull) || !strings.Contains(err.Error(), "2 entries") {
		t.Fatalf("third append: %v; want ErrFull naming the entry limit", err)
	}
	it, _, _ := b.First()
	if err := b.Delete(it.Seq, nil, nil); err != nil {
		t.Fatal(err)
	}
	_, err = b.Append([]byte("ccccccc"))
	if !errors.Is(err, outbox.ErrFull) || !strings.Contains(err.Error(), "bytes") {
		t.Fatalf("append over the byte limit: %v; want ErrFull naming the bytes", err)
	}
	if _, err := b.Append([]byte("cccccc")); err != nil {
		t.Fatalf("append up to the byte limit: %v", err)
	}
}

func TestDeadLettersAreBoundedAndRequeued(t *testing.T) {
	b := open(t, filepath.Join(t.TempDir(), "o"), outbox.Options{MaxDead: 2})
	for i := range 4 {
		if _, err := b.Append(fmt.Appendf(nil, "e%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	var dropped int
	for range 3 {
		it, _, _ := b.First()
		n, err := b.Bury(it.Seq, append([]byte("dead "), it.Value...))
		if err != nil {
			t.Fatal(err)
		}
		dropped += n
	}
	dead, _ := b.Dead()
	if got := strings.Join(values(t, dead), ","); got != "dead e1,dead e2" || dropped != 1 {
		t.Fatalf("dead letters %s, %d dropped; want the newest two, one dropped", got, dropped)
	}
	st, _ := b.Stats()
	if st.Entries != 1 || st.Dead != 2 {
		t.Fatalf("stats %+v", st)
	}
	moved, err := b.Requeue(func(v []byte) []byte { return []byte(strings.TrimPrefix(string(v), "dead ")) })
	if err != nil || moved != 2 {
		t.Fatalf("requeue: %d, %v", moved, err)
	}
	q, _ := b.Queued()
	if got := strings.Join(values(t, q), ","); got != "e3,e1,e2" {
		t.Fatalf("queue after requeue: %s; want the dead letters behind the queue", got)
	}
	if _, err := b.Bury(q[0].Seq, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if n, err := b.DropDead(); err != nil || n != 1 {
		t.Fatalf("DropDead: %d, %v", n, err)
	}
	if st, _ := b.Stats(); st.Dead != 0 || st.Entries != 2 {
		t.Fatalf("stats after DropDead: %+v", st)
	}
}

func TestRequeueStopsWhenFull(t *testing.T) {
	b := open(t, filepath.Join(t.TempDir(), "o"), outbox.Options{MaxEntries: 2})
	for range 2 {
		_, _ = b.Append([]byte("x"))
		it, _, _ := b.First()
		_, _ = b.Bury(it.Seq, it.Value)
	}
	_, _ = b.Append([]byte("y"))
	moved, err := b.Requeue(func(v []byte) []byte { return v })
	if moved != 1 || !errors.Is(err, outbox.ErrFull) {
		t.Fatalf("requeue into a nearly full queue: %d, %v; want 1 moved and ErrFull", moved, err)
	}
}

func TestAliases(t *testing.T) {
	b := open(t, filepath.Join(t.TempDir(), "o"), outbox.Options{MaxAliases: 2})
	for i := range 3 {
		seq, _ := b.Append([]byte("e"))
		if err := b.Delete(seq, fmt.Appendf(nil, "k%d", i), fmt.Appendf(nil, "v%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	for k, want := range map[string]string{"k0": "", "k1": "v1", "k2": "v2"} {
		v, err := b.Alias([]byte(k))
		if err != nil || string(v) != want {
			t.Fatalf("alias %s = %q, %v; want %q", k, v, err, want)
		}
	}
	if st, _ := b.Stats(); st.Entries != 0 || st.Bytes != 0 {
		t.Fatalf("stats %+v; want an empty queue", st)
	}
}

// TestSecondOpenerWaitsThenFails: one process (here: one Box) at a time
// opens the file; another waits LockTimeout, then gets ErrLocked, and gets
// in once the first has closed it. A read-only opener waits as well.
func TestSecondOpenerWaitsThenFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "o")
	first, err := outbox.Open(path, outbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = first.Append([]byte("a"))
	start := time.Now()
	_, err = outbox.Open(path, outbox.Options{LockTimeout: 100 * time.Millisecond})
	if !errors.Is(err, outbox.ErrLocked) || !strings.Contains(err.Error(), path) {
		t.Fatalf("second open: %v; want ErrLocked naming the file", err)
	}
	if waited := time.Since(start); waited < 50*time.Millisecond {
		t.Fatalf("second open gave up after %s, without waiting for the lock", waited)
	}
	if _, err := outbox.Open(path, outbox.Options{ReadOnly: true, LockTimeout: 50 * time.Millisecond}); !errors.Is(err, outbox.ErrLocked) {
		t.Fatalf("read-only open while a writer has it: %v; want ErrLocked", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	ro := open(t, path, outbox.Options{ReadOnly: true})
	if q, err := ro.Queued(); err != nil || len(q) != 1 {
		t.Fatalf("read-only: %v, %v", q, err)
	}
}

func TestOpenRefusesOtherFiles(t *testing.T) {
	dir := t.TempDir()
	if _, err := outbox.Open(filepath.Join(dir, "missing"), outbox.Options{ReadOnly: true}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("read-only open of a missing file: %v", err)
	}
	junk := filepath.Join(dir, "junk")
	if err := os.WriteFile(junk, []byte(strings.Repeat("not a bbolt file\n", 1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := outbox.Open(junk, outbox.Options{}); err == nil {
		t.Fatal("opened a file that is not an outbox")
	}
}
