package redisurl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestNodeUnreachable: a node that does not answer asks for a reload of the
// slot map; an answer, even an error reply, a cancelled call or a closed
// client does not.
func TestNodeUnreachable(t *testing.T) {
	t.Parallel()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", refused, true},
		{"connection refused, wrapped", fmt.Errorf("redis: connection pool: %w", refused), true},
		{"connection reset", reset, true},
		{"read timeout", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, true},
		{"context deadline", context.DeadlineExceeded, true},
		{"EOF", io.EOF, true},
		{"unexpected EOF", io.ErrUnexpectedEOF, true},
		{"redis.Nil", redis.Nil, false},
		{"an error reply", redis.ErrNoScript, false},
		{"an error reply, wrapped", fmt.Errorf("script: %w", redis.ErrCrossSlot), false},
		{"context cancelled", context.Canceled, false},
		{"closed client", redis.ErrClosed, false},
		{"something else", errors.New("redis: can't parse reply"), false},
	} {
		if got := nodeUnreachable(tc.err); got != tc.want {
			t.Errorf("%s (%v): nodeUnreachable = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
