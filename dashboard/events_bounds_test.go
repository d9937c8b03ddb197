package dashboard_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/dashboard"
	"github.com/cairnhq/cairn/internal/testkit"
)

// notificationsKey is the queue's notification stream (retrystate's keys).
func (e *env) notificationsKey() string { return "cairn:{" + e.queue + "}:notifications" }

// fakeNotification is what the scripts' notify() (retrystate/lua/lib/notify.lua)
// writes for a run_succeeded of run, owned by owner: type, at, run,
// workflow, owner, then the extra fields.
func fakeNotification(run, owner string, extra ...any) []any {
	return append([]any{"type", "run_succeeded", "at", strconv.FormatInt(time.Now().UnixMilli(), 10), "run", run,
		"workflow", "demo", "owner", owner}, extra...)
}

// addNotifications appends n notifications to the queue's stream, with the
// entry IDs ids(i) ("*": Redis's), of runs run0000... owned by alice (even
// i) and bob (odd i), and returns their IDs.
func (e *env) addNotifications(n int, id func(i int) string, extra ...any) []string {
	e.t.Helper()
	ctx := context.Background()
	out := make([]string, 0, n)
	for start := 0; start < n; start += 500 {
		pipe := e.rdb.Pipeline()
		var cmds []*redis.StringCmd
		for i := start; i < min(n, start+500); i++ {
			owner := "alice"
			if i%2 == 1 {
				owner = "bob"
			}
			cmds = append(cmds, pipe.XAdd(ctx, &redis.XAddArgs{Stream: e.notificationsKey(), ID: id(i),
				Values: fakeNotification(fmt.Sprintf("run%04d", i), owner, extra...)}))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			e.t.Fatal(err)
		}
		for _, c := range cmds {
			out = append(out, c.Val())
		}
	}
	return out
}

func redisID(int) string { return "*" }

// item returns the next event or comment of the stream, other than the
// greeting and heartbeats.
func (s *stream) item(timeout time.Duration) sseEvent {
	s.t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				s.t.Fatalf("stream %s ended", s.name)
			}
			if ev.comment == "heartbeat" || ev.comment == "stream of run events" {
				continue
			}
			return ev
		case <-deadline.C:
			s.t.Fatalf("stream %s: nothing within %s", s.name, timeout)
		}
	}
}

// expectReplay reads a replay from s: with capped, the comment and the
// replay_capped event resuming after resumedAfter, then the events of ids,
// in order.
func (s *stream) expectReplay(capped bool, lastEventID, resumedAfter string, ids []string) {
	s.t.Helper()
	if capped {
		if ev := s.item(10 * time.Second); ev.comment != "replay capped" || ev.event != "" {
			s.t.Fatalf("stream %s: %+v, want the comment \"replay capped\"", s.name, ev)
		}
		ev := s.item(10 * time.Second)
		if ev.event != "replay_capped" || ev.id != "" {
			s.t.Fatalf("stream %s: %+v, want a replay_capped event without id", s.name, ev)
		}
		var rc dashboard.ReplayCapped
		if err := json.Unmarshal([]byte(ev.data), &rc); err != nil {
			s.t.Fatalf("replay_capped data %q: %v", ev.data, err)
		}
		if rc.LastEventID != lastEventID || rc.ResumedAfter != resumedAfter {
			s.t.Fatalf("stream %s: replay_capped %+v, want last_event_id %s, resumed_after %s", s.name, rc, lastEventID, resumedAfter)
		}
	}
	for i, id := range ids {
		ev := s.item(10 * time.Second)
		if ev.comment != "" || ev.id != id || ev.event != "run_succeeded" {
			s.t.Fatalf("stream %s: event %d of the replay is %+v, want run_succeeded %s", s.name, i, ev, id)
		}
	}
}

// alicesOf returns the IDs of ids whose notification (as addNotifications
// writes them, from index first on) belongs to alice.
func alicesOf(ids []string, first int) []string {
	var out []string
	for i, id := range ids {
		if (first+i)%2 == 0 {
			out = append(out, id)
		}
	}
	return out
}

// TestEventReplayCappedByCount: a stream resuming with Last-Event-ID
// replays at most the newest 1,000 entries of the notification stream,
// says so when it skips some, and goes on live.
func TestEventReplayCappedByCount(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorker: true})
	ids := e.addNotifications(1500, redisID)

	// From the beginning: the newest 1,000, after the notice.
	e.openStream("root 0-0", rootToken, "0-0").expectReplay(true, "0-0", ids[499], ids[500:])
	// A user's: theirs among the newest 1,000.
	alice := e.openStream("alice 0-0", aliceToken, "0-0")
	alice.expectReplay(true, "0-0", ids[499], alicesOf(ids[500:], 500))
	// An ID 1,001 entries back is moved forward; 1,000 back, and less, is not.
	e.openStream("root 1001 back", rootToken, ids[498]).expectReplay(true, ids[498], ids[499], ids[500:])
	e.openStream("root 1000 back", rootToken, ids[499]).expectReplay(false, "", "", ids[500:])
	e.openStream("root 300 back", rootToken, ids[1199]).expectReplay(false, "", "", ids[1200:])

	// The capped stream goes on live.
	more := e.addNotifications(2, redisID)
	alice.expectReplay(false, "", "", more[:1])
}

// TestEventReplayCappedByAge: a stream resuming with Last-Event-ID replays
// no notification older than 24h, and of the two bounds the more recent
// start wins.
func TestEventReplayCappedByAge(t *testing.T) {
	t.Parallel()
	at := func(age time.Duration) func(int) string {
		ms := time.Now().Add(-age).UnixMilli()
		return func(i int) string { return fmt.Sprintf("%d-%d", ms, i) }
	}
	t.Run("age", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOptions{noWorker: true})
		old := e.addNotifications(3, at(48*time.Hour))
		old = append(old, e.addNotifications(2, at(25*time.Hour))...)
		recent := e.addNotifications(5, redisID)
		// Resumed after the newest entry older than 24h.
		for _, from := range []string{"0-0", old[0], old[3]} {
			e.openStream("root "+from, rootToken, from).expectReplay(true, from, old[4], recent)
		}
		// Nothing of the last 24h skipped: not capped.
		e.openStream("root last old", rootToken, old[4]).expectReplay(false, "", "", recent)
		e.openStream("root recent", rootToken, recent[0]).expectReplay(false, "", "", recent[1:])
	})
	t.Run("age wins", func(t *testing.T) {
		t.Parallel()
		// The newest 1,000 hold 100 entries older than 24h: those go.
		e := newEnv(t, envOptions{noWorker: true})
		old := e.addNotifications(600, at(30*time.Hour))
		recent := e.addNotifications(900, redisID)
		e.openStream("root", rootToken, "0-0").expectReplay(true, "0-0", old[599], recent)
	})
	t.Run("count wins", func(t *testing.T) {
		t.Parallel()
		// 1,300 entries of the last 24h: the newest 1,000 of them.
		e := newEnv(t, envOptions{noWorker: true})
		e.addNotifications(200, at(30*time.Hour))
		recent := e.addNotifications(1300, redisID)
		e.openStream("root", rootToken, "0-0").expectReplay(true, "0-0", recent[299], recent[300:])
	})
	t.Run("nothing skipped", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOptions{noWorker: true})
		recent := e.addNotifications(5, redisID)
		e.openStream("root", rootToken, "0-0").expectReplay(false, "", "", recent)
	})
}

// TestEventStreamsPerSubject: a subject has at most 8 event streams open;
// the 9th is 429 with a problem and Retry-After, and a closed stream frees
// its slot. Other subjects are not affected; admins have the same limit.
func TestEventStreamsPerSubject(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorker: true})
	open := func(who, token string) []*stream {
		var ss []*stream
		for i := range 8 {
			ss = append(ss, e.openStream(fmt.Sprintf("%s %d", who, i), token, ""))
		}
		return ss
	}
	refused := func(who, token string) {
		t.Helper()
		resp := e.do(req{method: "GET", path: "/api/v1/events", token: token, stream: true})
		if resp.status != http.StatusTooManyRequests {
			t.Fatalf("%s's 9th stream: status %d, want 429", who, resp.status)
		}
		p := resp.problem(t)
		if p.Type != dashboard.ProblemType(dashboard.ProblemTooManyStreams) || p.Status != 429 || !strings.Contains(p.Detail, who) {
			t.Errorf("%s's 9th stream: problem %+v", who, p)
		}
		if ra, err := strconv.Atoi(resp.header.Get("Retry-After")); err != nil || ra <= 0 {
			t.Errorf("%s's 9th stream: Retry-After %q", who, resp.header.Get("Retry-After"))
		}
		if n := dashboard.OpenStreams(e.srv, who); n != 8 {
			t.Errorf("%s has %d streams open after the refusal, want 8", who, n)
		}
	}

	alice := open("alice", aliceToken)
	if n := dashboard.OpenStreams(e.srv, "alice"); n != 8 {
		t.Fatalf("alice has %d streams open, want 8", n)
	}
	refused("alice", aliceToken)
	bob := e.openStream("bob", bobToken, "")
	alice[0].stop()
	testkit.Eventually(e.t, 10*time.Second, "alice's closed stream to free its slot", func() bool {
		return dashboard.OpenStreams(e.srv, "alice") == 7
	})
	e.openStream("alice again", aliceToken, "")
	refused("alice", aliceToken)

	open("root", rootToken)
	refused("root", rootToken)

	// The streams still work.
	more := e.addNotifications(2, redisID)
	alice[7].expectReplay(false, "", "", more[:1])
	bob.expectReplay(false, "", "", more[1:])
}

// smallBuffers is a listener whose connections have a small send buffer, so
// that a client that does not read blocks the server's writes quickly.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

// TestEventStreamDropsClientThatDoesNotRead: a client that takes nothing of
// its stream is dropped after the write timeout: the server closes the
// connection and frees the subject's slot.
func TestEventStreamDropsClientThatDoesNotRead(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorker: true, writeTimeout: 300 * time.Millisecond})
	// 1 MiB of notifications to replay: far more than the buffers hold.
	big := strings.Repeat("x", 16<<10)
	e.addNotifications(64, redisID, "reason", big)

	ts := httptest.NewUnstartedServer(e.srv.Handler())
	ts.Listener = smallBuffers{ts.Listener}
	ts.Start()
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	// A client with a tiny receive buffer that reads the status line and
	// then nothing.
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048)
		}); err != nil {
			return err
		}
		return serr
	}}
	conn, err := d.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "GET /api/v1/events HTTP/1.1\r\nHost: cairn\r\nAuthorization: Bearer %s\r\nLast-Event-ID: 0-0\r\n\r\n", aliceToken); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	status, err := bufio.NewReaderSize(conn, 64).ReadString('\n')
	if err != nil || !strings.HasPrefix(status, "HTTP/1.1 200") {
		t.Fatalf("status line %q, %v", status, err)
	}

	// The server gives up on it, and frees alice's slot.
	testkit.Eventually(e.t, 30*time.Second, "the stream to be dropped", func() bool {
		return strings.Contains(e.logs.String(), "event stream dropped") && dashboard.OpenStreams(e.srv, "alice") == 0
	})
	// The connection is closed: reading on ends (EOF, or a reset), rather
	// than wait for more.
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	n, err := io.Copy(io.Discard, conn)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the connection is still open 30s after the stream was dropped (%d bytes read)", n)
	}
	if n >= int64(64*len(big)) {
		t.Errorf("the client got %d bytes: the whole replay, so the stream was not blocked", n)
	}
	// alice may open a stream again.
	e.openStream("alice", aliceToken, "")
}
