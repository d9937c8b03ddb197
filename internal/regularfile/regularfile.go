// Package regularfile reads files and streams that the caller does not
// trust to be small or to end: only regular files (a named pipe, a device or
// a directory is refused at once, without blocking), at most a limit of
// bytes, and no longer than a context allows. The CLI reads --input @file
// and validate's file with it, the worker its workflows file.
package regularfile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrTooLarge is wrapped by the error of ReadBounded and Read for content
// over their limit.
var ErrTooLarge = errors.New("too large")

// tooLarge is the error of content over limit bytes.
func tooLarge(limit int64) error {
	return fmt.Errorf("%w: larger than %d bytes", ErrTooLarge, limit)
}

// NotRegularError is the error of Read for a path that is not a regular
// file.
type NotRegularError struct {
	Path string
	// Kind says what it is: "a directory", "a named pipe (FIFO)", ...
	Kind string
}

func (e *NotRegularError) Error() string { return e.Path + " is " + e.Kind + ", not a regular file" }

// ReadBounded reads r to its end, at most limit bytes: it reads limit+1
// bytes at most and returns ErrTooLarge if there are more than limit. It
// returns ctx's error as soon as ctx is done, even while a read blocks (on a
// terminal or a pipe nobody writes to); the blocked read is then left
// behind, to end when r does.
func ReadBounded(ctx context.Context, r io.Reader, limit int64) ([]byte, error) {
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		data, err := io.ReadAll(io.LimitReader(r, limit+1))
		done <- result{data, err}
	}()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case res := <-done:
		if res.err != nil {
			return nil, res.err
		}
		if int64(len(res.data)) > limit {
			return nil, tooLarge(limit)
		}
		return res.data, nil
	}
}

// Read reads the file at path, which must be a regular file (or a
// symbolic link to one) of at most limit bytes. Anything else (a
// directory, a named pipe, a socket, a device such as /dev/zero) is refused
// at once, without reading or waiting: it is checked before the file is
// opened, and the open file is checked again, in case another file took the
// name between the two; the open does not block, even on a named pipe.
// A missing or unreadable file is an *fs.PathError with Op "open", one that
// is not a regular file a *NotRegularError.
func Read(ctx context.Context, path string, limit int64) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		if pe, ok := errors.AsType[*fs.PathError](err); ok {
			return nil, &fs.PathError{Op: "open", Path: path, Err: pe.Err}
		}
		return nil, err
	}
	if err := checkRegular(path, fi); err != nil {
		return nil, err
	}
	// O_NONBLOCK: opening a named pipe for reading would otherwise wait for
	// a writer. It changes nothing for reading a regular file.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, err
	}
	if err := checkRegular(path, fi); err != nil {
		return nil, err
	}
	if fi.Size() > limit {
		return nil, tooLarge(limit)
	}
	return ReadBounded(ctx, f, limit)
}

// checkRegular returns a *NotRegularError unless fi is a regular file's.
func checkRegular(path string, fi fs.FileInfo) error {
	if fi.Mode().IsRegular() {
		return nil
	}
	return &NotRegularError{Path: path, Kind: fileKind(fi.Mode())}
}

// fileKind names the type of a file that is not regular.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "a special file"
}
