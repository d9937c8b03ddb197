package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/workflow"
)

// netErr is a net.Error whose Timeout is fixed.
type netErr struct{ timeout bool }

func (e netErr) Error() string   { return fmt.Sprintf("net error (timeout %v)", e.timeout) }
func (e netErr) Timeout() bool   { return e.timeout }
func (e netErr) Temporary() bool { return e.timeout }

var _ net.Error = netErr{}

func opError(op string, errno syscall.Errno) error {
	return &net.OpError{Op: op, Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 6379},
		Err: os.NewSyscallError(op, errno)}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	plain := errors.New("boom")
	const (
		transient = workflow.ClassTransient
		permanent = workflow.ClassPermanent
	)
	tests := []struct {
		name      string
		err       error
		transient bool   // IsTransient
		perm      bool   // IsPermanent
		lenient   string // Classify under UnknownTransient
		strict    string // Classify under UnknownPermanent
	}{
		{"plain", plain, false, false, transient, permanent},
		{"plain wrapped", fmt.Errorf("step: %w", plain), false, false, transient, permanent},
		{"context.Canceled", context.Canceled, false, false, transient, permanent},
		{"io.EOF", io.EOF, false, false, transient, permanent},
		{"ENOENT", &os.PathError{Op: "open", Path: "/x", Err: syscall.ENOENT}, false, false, transient, permanent},
		{"net.Error without timeout", netErr{timeout: false}, false, false, transient, permanent},
		{"net.Error without timeout wrapped", fmt.Errorf("call: %w", netErr{timeout: false}), false, false, transient, permanent},

		{"Permanent", workflow.Permanent(plain), false, true, permanent, permanent},
		{"Permanent wrapped", fmt.Errorf("a: %w", fmt.Errorf("b: %w", workflow.Permanent(plain))), false, true, permanent, permanent},
		{"Permanent joined", errors.Join(errors.New("other"), workflow.Permanent(plain)), false, true, permanent, permanent},
		{"Permanent beats a timeout", workflow.Permanent(context.DeadlineExceeded), true, true, permanent, permanent},
		{"Permanent beats RetryAfter", workflow.Permanent(workflow.RetryAfter(plain, time.Second)), true, true, permanent, permanent},
		{"Permanent inside RetryAfter", workflow.RetryAfter(workflow.Permanent(plain), time.Second), true, true, permanent, permanent},
		{"Permanent with a code", workflow.WithCode(workflow.Permanent(plain), "declined"), false, true, permanent, permanent},

		{"RetryAfter", workflow.RetryAfter(plain, time.Minute), true, false, transient, transient},
		{"RetryAfter wrapped", fmt.Errorf("x: %w", workflow.RetryAfter(plain, 0)), true, false, transient, transient},
		{"RetryAfter joined", errors.Join(plain, workflow.RetryAfter(plain, time.Second)), true, false, transient, transient},
		{"context.DeadlineExceeded", context.DeadlineExceeded, true, false, transient, transient},
		{"DeadlineExceeded wrapped", fmt.Errorf("query: %w", context.DeadlineExceeded), true, false, transient, transient},
		{"DeadlineExceeded joined", errors.Join(plain, context.DeadlineExceeded), true, false, transient, transient},
		{"os.ErrDeadlineExceeded", os.ErrDeadlineExceeded, true, false, transient, transient},
		{"os.ErrDeadlineExceeded in PathError", &os.PathError{Op: "read", Path: "/dev/x", Err: os.ErrDeadlineExceeded}, true, false, transient, transient},
		{"net.Error with timeout", netErr{timeout: true}, true, false, transient, transient},
		{"net.Error with timeout wrapped", fmt.Errorf("call: %w", netErr{timeout: true}), true, false, transient, transient},
		{"ECONNREFUSED", syscall.ECONNREFUSED, true, false, transient, transient},
		{"ECONNREFUSED in OpError", opError("dial", syscall.ECONNREFUSED), true, false, transient, transient},
		{"ECONNREFUSED in SyscallError", os.NewSyscallError("connect", syscall.ECONNREFUSED), true, false, transient, transient},
		{"ECONNRESET in OpError", opError("read", syscall.ECONNRESET), true, false, transient, transient},
		{"ECONNRESET in SyscallError wrapped", fmt.Errorf("fetch: %w", os.NewSyscallError("read", syscall.ECONNRESET)), true, false, transient, transient},
		{"EPIPE in OpError", opError("write", syscall.EPIPE), true, false, transient, transient},
		{"ECONNABORTED", os.NewSyscallError("accept", syscall.ECONNABORTED), true, false, transient, transient},
		{"io.ErrUnexpectedEOF", io.ErrUnexpectedEOF, true, false, transient, transient},
		{"io.ErrUnexpectedEOF wrapped", fmt.Errorf("decode: %w", io.ErrUnexpectedEOF), true, false, transient, transient},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := workflow.IsTransient(tt.err); got != tt.transient {
				t.Errorf("IsTransient(%v) = %v, want %v", tt.err, got, tt.transient)
			}
			if got := workflow.IsPermanent(tt.err); got != tt.perm {
				t.Errorf("IsPermanent(%v) = %v, want %v", tt.err, got, tt.perm)
			}
			if got := workflow.Classify(tt.err, workflow.UnknownTransient); got != tt.lenient {
				t.Errorf("Classify(%v, UnknownTransient) = %s, want %s", tt.err, got, tt.lenient)
			}
			if got := workflow.Classify(tt.err, ""); got != tt.lenient {
				t.Errorf("Classify(%v, unset mode) = %s, want %s", tt.err, got, tt.lenient)
			}
			if got := workflow.Classify(tt.err, workflow.UnknownPermanent); got != tt.strict {
				t.Errorf("Classify(%v, UnknownPermanent) = %s, want %s", tt.err, got, tt.strict)
			}
		})
	}
}

func TestNilErrors(t *testing.T) {
	t.Parallel()
	if err := workflow.Permanent(nil); err != nil {
		t.Errorf("Permanent(nil) = %#v, want nil", err)
	}
	if err := workflow.RetryAfter(nil, time.Second); err != nil {
		t.Errorf("RetryAfter(nil, 1s) = %#v, want nil", err)
	}
	if err := workflow.WithCode(nil, "code"); err != nil {
		t.Errorf("WithCode(nil, code) = %#v, want nil", err)
	}
	if workflow.IsTransient(nil) || workflow.IsPermanent(nil) {
		t.Error("nil error is transient or permanent")
	}
	if d, ok := workflow.RetryDelayOf(nil); ok || d != 0 {
		t.Errorf("RetryDelayOf(nil) = %v, %v", d, ok)
	}
	if c := workflow.Code(nil); c != "" {
		t.Errorf("Code(nil) = %q", c)
	}
}

// TestMarkersKeepTheError checks that every marker keeps the message and
// the chain of the error it marks.
func TestMarkersKeepTheError(t *testing.T) {
	t.Parallel()
	inner := fmt.Errorf("charge card: %w", io.ErrUnexpectedEOF)
	for name, err := range map[string]error{
		"Permanent":  workflow.Permanent(inner),
		"RetryAfter": workflow.RetryAfter(inner, time.Second),
		"WithCode":   workflow.WithCode(inner, "card_declined"),
	} {
		if err.Error() != inner.Error() {
			t.Errorf("%s: Error() = %q, want %q", name, err, inner)
		}
		if !errors.Is(err, inner) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%s: errors.Is does not reach the marked error", name)
		}
		if errors.Unwrap(err) != inner { //nolint:errorlint // Unwrap must return the marked error itself
			t.Errorf("%s: Unwrap = %v, want the marked error", name, errors.Unwrap(err))
		}
	}
}

func TestRetryDelayOf(t *testing.T) {
	t.Parallel()
	plain := errors.New("rate limited")
	tests := []struct {
		name string
		err  error
		want time.Duration
		ok   bool
	}{
		{"plain", plain, 0, false},
		{"timeout", context.DeadlineExceeded, 0, false},
		{"permanent", workflow.Permanent(plain), 0, false},
		{"set", workflow.RetryAfter(plain, 5*time.Second), 5 * time.Second, true},
		{"zero", workflow.RetryAfter(plain, 0), 0, true},
		{"negative clamps to 0", workflow.RetryAfter(plain, -time.Minute), 0, true},
		{"wrapped", fmt.Errorf("api: %w", workflow.RetryAfter(plain, time.Minute)), time.Minute, true},
		{"joined", errors.Join(plain, workflow.RetryAfter(plain, 3*time.Second)), 3 * time.Second, true},
		{"with a code", workflow.WithCode(workflow.RetryAfter(plain, time.Hour), "429"), time.Hour, true},
		{"outermost wins", workflow.RetryAfter(workflow.RetryAfter(plain, time.Second), 2*time.Second), 2 * time.Second, true},
	}
	for _, tt := range tests {
		got, ok := workflow.RetryDelayOf(tt.err)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: RetryDelayOf = %v, %v; want %v, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

func TestCode(t *testing.T) {
	t.Parallel()
	plain := errors.New("declined")
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"none", plain, ""},
		{"set", workflow.WithCode(plain, "card_declined"), "card_declined"},
		{"empty code", workflow.WithCode(plain, ""), ""},
		{"wrapped", fmt.Errorf("pay: %w", workflow.WithCode(plain, "card_declined")), "card_declined"},
		{"under Permanent", workflow.Permanent(workflow.WithCode(plain, "fraud")), "fraud"},
		{"under RetryAfter", workflow.RetryAfter(workflow.WithCode(plain, "429"), time.Second), "429"},
		{"outermost wins", workflow.WithCode(workflow.WithCode(plain, "inner"), "outer"), "outer"},
		{"joined: first wins", errors.Join(plain, workflow.WithCode(plain, "a"), workflow.WithCode(plain, "b")), "a"},
	}
	for _, tt := range tests {
		if got := workflow.Code(tt.err); got != tt.want {
			t.Errorf("%s: Code = %q, want %q", tt.name, got, tt.want)
		}
	}
	// A code does not change the class.
	if workflow.IsPermanent(workflow.WithCode(plain, "x")) || workflow.IsTransient(workflow.WithCode(plain, "x")) {
		t.Error("WithCode changed the classification of a plain error")
	}
}

// TestClassifyRealNetworkErrors classifies errors from real sockets, not
// hand-built ones.
func TestClassifyRealNetworkErrors(t *testing.T) {
	t.Parallel()

	t.Run("connection refused", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		if err := ln.Close(); err != nil {
			t.Fatal(err)
		}
		d := net.Dialer{Timeout: 5 * time.Second}
		conn, err := d.DialContext(context.Background(), "tcp", addr)
		if err == nil {
			_ = conn.Close()
			t.Skipf("something listens on %s again", addr)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial of a closed port: %v, want ECONNREFUSED", err)
		}
		wrapped := fmt.Errorf("call inventory service: %w", err)
		if !workflow.IsTransient(wrapped) || workflow.Classify(wrapped, workflow.UnknownPermanent) != workflow.ClassTransient {
			t.Errorf("refused connection %v is not transient", err)
		}
	})

	t.Run("read deadline", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if err := conn.SetReadDeadline(time.Now()); err != nil {
			t.Fatal(err)
		}
		_, err = conn.Read(make([]byte, 1))
		if err == nil {
			t.Fatal("read past its deadline succeeded")
		}
		if !workflow.IsTransient(err) || workflow.Classify(err, workflow.UnknownPermanent) != workflow.ClassTransient {
			t.Errorf("read timeout %v is not transient", err)
		}
	})

	t.Run("context deadline", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithDeadline(context.Background(), time.Now())
		defer cancel()
		<-ctx.Done()
		if err := ctx.Err(); workflow.Classify(err, workflow.UnknownPermanent) != workflow.ClassTransient {
			t.Errorf("expired context %v is not transient", err)
		}
	})
}

// replyError is a Redis error reply, as go-redis returns one.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

func TestIsRedisUnavailable(t *testing.T) {
	t.Parallel()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{refused, true},
		{fmt.Errorf("retrystate: list: %w", refused), true},
		{timeout, true},
		{redis.ErrPoolTimeout, true},
		{redis.ErrPoolExhausted, true},
		{redis.ErrClosed, true},
		{io.EOF, true},
		{replyError("LOADING Redis is loading the dataset in memory"), true},
		{replyError("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."), true},
		{replyError("CLUSTERDOWN The cluster is down"), true},
		{replyError("TRYAGAIN Multiple keys request during rehashing of slot"), true},
		{replyError("READONLY You can't write against a read only replica."), true},
		{replyError("NOREPLICAS Not enough good replicas to write."), true},
		{replyError("OOM command not allowed when used memory > 'maxmemory'."), true},
		{replyError("BUSY Redis is busy running a script."), true},
		{replyError("ERR max number of clients reached"), true},
		{errors.New("redis: all sentinels specified in configuration are unreachable"), true},
		{errors.New("redis: cluster has no nodes"), true},
		{context.DeadlineExceeded, true}, // as a command that got no answer in time: callers check their ctx
		{nil, false},
		{context.Canceled, false},
		{replyError("ERR unknown command 'FOO'"), false},
		{replyError("WRONGTYPE Operation against a key holding the wrong kind of value"), false},
		{redis.ErrNoScript, false},
		{redis.Nil, false},
		{workflow.ErrRunNotFound, false},
		{fmt.Errorf("%w: nope", workflow.ErrInvalidInput), false},
		{errors.New("boom"), false},
	} {
		if got := workflow.IsRedisUnavailable(c.err); got != c.want {
			t.Errorf("IsRedisUnavailable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
