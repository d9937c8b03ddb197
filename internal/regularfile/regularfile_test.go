package regularfile_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/regularfile"
)

// TestRead: a regular file within the limit is read; over the limit is
// ErrTooLarge; a directory, a named pipe nobody writes to and a device are
// a *NotRegularError at once, without blocking.
func TestRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok")
	if err := os.WriteFile(ok, []byte("12345"), 0o600); err != nil {
		t.Fatal(err)
	}
	if data, err := regularfile.Read(context.Background(), ok, 5); err != nil || string(data) != "12345" {
		t.Errorf("Read within the limit = %q, %v", data, err)
	}
	if _, err := regularfile.Read(context.Background(), ok, 4); !errors.Is(err, regularfile.ErrTooLarge) {
		t.Errorf("Read over the limit = %v, want ErrTooLarge", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for path, kind := range map[string]string{dir: "a directory", fifo: "a named pipe (FIFO)", "/dev/zero": "a character device"} {
		done := make(chan error, 1)
		go func() {
			_, err := regularfile.Read(context.Background(), path, 5)
			done <- err
		}()
		select {
		case err := <-done:
			var nr *regularfile.NotRegularError
			if !errors.As(err, &nr) || nr.Kind != kind || nr.Path != path {
				t.Errorf("Read(%s) = %v, want a NotRegularError saying %q", path, err, kind)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Read(%s) still blocks after 10s", path)
		}
	}
}
