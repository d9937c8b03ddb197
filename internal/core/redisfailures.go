package core

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// RedisUnreachable reports whether err means that a command did not reach
// Redis or got no answer: a failed dial, a refused, reset or closed
// connection, a timeout, a pool timeout, and the replies of a server that
// cannot serve yet (LOADING, BUSY, MASTERDOWN, TRYAGAIN, CLUSTERDOWN), which
// execute nothing. A closed client (redis.ErrClosed) is not: the
// application closed it.
func RedisUnreachable(err error) bool {
	if err == nil || errors.Is(err, redis.ErrClosed) {
		return false
	}
	if rerr, ok := errors.AsType[redis.Error](err); ok {
		msg := rerr.Error()
		for _, p := range []string{"LOADING ", "BUSY ", "MASTERDOWN ", "TRYAGAIN ", "CLUSTERDOWN "} {
			if strings.HasPrefix(msg, p) {
				return true
			}
		}
		return false
	}
	if errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, net.ErrClosed) {
		return true
	}
	_, ok := errors.AsType[net.Error](err)
	return ok
}

// RedisBusy reports the replies of a server that refuses writes for now
// (out of memory, a read-only replica): the flusher waits for it rather
// than dead-letter its entries. Start and Signal return these errors.
func RedisBusy(err error) bool {
	rerr, ok := errors.AsType[redis.Error](err)
	if !ok {
		return false
	}
	for _, p := range []string{"OOM ", "READONLY ", "NOREPLICAS "} {
		if strings.HasPrefix(rerr.Error(), p) {
			return true
		}
	}
	return false
}
