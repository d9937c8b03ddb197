package engine

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/core"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/retrystate"
)

// TestLatencyRecorderBounds: the recorder keeps at most maxLatencySeries
// series between flushes (the rest is dropped, and counted), refuses
// names it must not keep, and keeps what a failed flush could not write
// for the next flush.
func TestLatencyRecorderBounds(t *testing.T) {
	t.Parallel()
	rdb := redistest.Shared(t).Client(t)
	q := "lat-" + core.NewToken() // a queue of its own, run after run
	at := time.UnixMilli(1_800_000_000_000)
	r := newLatencyRecorder(retrystate.New(rdb, q), core.SystemClock, slog.New(slog.DiscardHandler))

	for i := range maxLatencySeries + 5 {
		r.record(retrystate.LatencyDuration, "wf", fmt.Sprintf("s%d", i), time.Duration(i)*time.Millisecond, at)
	}
	r.record(retrystate.LatencyDuration, "wf", "s0", time.Second, at) // a known series: kept
	r.record(retrystate.LatencyWait, "wf", strings.Repeat("x", retrystate.MaxLatencyName+1), 0, at)
	r.record(retrystate.LatencyWait, "w|f", "s", 0, at)
	counts, dropped := r.take()
	if len(counts) != maxLatencySeries+1 || dropped != 5 {
		t.Fatalf("%d counters, %d dropped; want %d and 5", len(counts), dropped, maxLatencySeries+1)
	}

	// A flush that fails keeps its counts; the next one writes them.
	r.record(retrystate.LatencyDuration, "wf", "a", 3*time.Millisecond, at)
	r.record(retrystate.LatencyDuration, "wf", "a", 3*time.Millisecond, at)
	// A port nobody listens on: the listener is closed at once.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	down := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { _ = down.Close() })
	r.store = retrystate.New(down, q)
	if err := r.flush(context.Background()); err == nil {
		t.Fatal("a flush to an unreachable Redis succeeded")
	}
	r.store = retrystate.New(rdb, q)
	if err := r.flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	key := fmt.Sprintf("cairn:{%s}:lat:%d", q, retrystate.LatencyHour(at))
	field := fmt.Sprintf("d|wf|a|%d", retrystate.LatencyBucket(3*time.Millisecond))
	if got, err := rdb.HGetAll(context.Background(), key).Result(); err != nil || len(got) != 1 || got[field] != "2" {
		t.Errorf("after the failed flush and the next: %v %v, want %s = 2", got, err, field)
	}
	// Nothing left: the next flush writes nothing.
	if c, d := r.take(); len(c) != 0 || d != 0 {
		t.Errorf("left after the flush: %v, %d dropped", c, d)
	}
}
