package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/cairnhq/cairn/workflow"
)

// StreamEvent is the data of one event of GET /api/v1/events: a
// notification, and for step_failed whether the step can be retried and
// skipped (POST .../steps/{step}/retry and .../skip).
type StreamEvent struct {
	workflow.Notification
	CanRetry *bool `json:"can_retry,omitempty"`
	CanSkip  *bool `json:"can_skip,omitempty"`
}

func streamEvent(n workflow.Notification) StreamEvent {
	ev := StreamEvent{Notification: n}
	if n.Type == "step_failed" {
		retry, skip := true, n.Details["optional"] == "1"
		ev.CanRetry, ev.CanSkip = &retry, &skip
	}
	return ev
}

// ReplayCapped is the data of the replay_capped event, which a stream
// resuming with Last-Event-ID sends first when its replay is capped
// (Config.EventReplayEntries, Config.EventReplayAge): the stream goes on
// after ResumedAfter, and the notifications between LastEventID and it are
// not sent. A client that keeps state from the events should read it again.
type ReplayCapped struct {
	LastEventID  string `json:"last_event_id"`
	ResumedAfter string `json:"resumed_after"`
}

// eventsRetryAfter is the Retry-After, in seconds, of a stream refused
// because its subject has too many open.
const eventsRetryAfter = 10

// events serves GET /api/v1/events: Server-Sent Events of the transitions
// of the caller's runs (every run for an admin), from the queue's
// notification stream. Each event has the notification's stream ID as its
// id, its type as event name, and a StreamEvent as JSON data. A comment
// line every Config.Heartbeat keeps idle connections open.
//
// Without Last-Event-ID (or ?last_event_id=) the stream starts with the
// next notification. A client that reconnects with it gets what it missed,
// within bounds: at most the newest Config.EventReplayEntries (default
// 1,000) entries of the queue's notification stream (every subject's
// entries count, whether the caller sees them or not) and none older than
// Config.EventReplayAge (default 24h); an older ID is moved forward to the
// more recent of the two bounds, and the stream then begins with the
// comment ": replay capped" and a replay_capped event (see ReplayCapped).
// An ID beyond the newest notification starts after the newest.
//
// A subject has at most Config.EventStreamsPerSubject (default 8) streams
// open on this server (each replica counts its own); one more is answered
// 429, problem too-many-streams, with Retry-After. Each write to the
// client must go through within Config.EventWriteTimeout (default 30s): a
// client that stops reading is dropped once its connection's buffers are
// full and it has taken nothing for that long, which frees its slot.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	cursor, err := eventsCursor(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx := r.Context()
	p := principal(r)
	log := reqLog(r)
	release, open, ok := s.streams.acquire(p.Subject)
	if !ok {
		log.Info("event stream refused: the subject has too many open", "subject", p.Subject, "open", open)
		w.Header().Set("Retry-After", strconv.Itoa(eventsRetryAfter))
		writeProblem(w, r, http.StatusTooManyRequests, ProblemTooManyStreams, fmt.Sprintf(
			"%d event streams of subject %q are open on this server, the most allowed; close one, or retry later",
			open, p.Subject))
		return
	}
	defer release()
	// Subscribe before reading: a notification added from now on wakes
	// this stream, and anything earlier is in the first read.
	wake, unsubscribe := s.hub.subscribe()
	defer unsubscribe()
	cursor, capped, err := s.eventsStart(ctx, cursor)
	if err != nil {
		s.fail(w, r, err)
		return
	}

	sw := &sseWriter{w: w, rc: http.NewResponseController(w), timeout: s.cfg.EventWriteTimeout}
	defer func() {
		if errors.Is(sw.err, os.ErrDeadlineExceeded) {
			log.Info("event stream dropped: the client took nothing for the write timeout", "subject", p.Subject,
				"write_timeout", s.cfg.EventWriteTimeout)
		}
	}()
	if !sw.begin(capped) {
		return
	}
	heartbeat := time.NewTicker(s.cfg.Heartbeat)
	defer heartbeat.Stop()
	for {
		if cursor, ok = s.sendNotifications(ctx, sw, p, log, cursor); !ok {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-heartbeat.C:
			// The comment keeps proxies from closing an idle stream; the
			// loop then also reads, in case a wake-up was lost.
			if !sw.write(": heartbeat\n\n") || !sw.flush() {
				return
			}
		}
	}
}

// eventsCursor returns the stream ID an event stream resumes after: its
// request's Last-Event-ID (or ?last_event_id=), normalized, or "" for none.
func eventsCursor(r *http.Request) (string, error) {
	cursor := r.Header.Get("Last-Event-ID")
	if cursor == "" {
		cursor = r.URL.Query().Get("last_event_id")
	}
	if cursor == "" {
		return "", nil
	}
	id, err := streamIDParam("Last-Event-ID", cursor)
	if err != nil {
		return "", err
	}
	return id.String(), nil
}

// eventsStart returns where an event stream starts reading: after the
// newest notification for a stream without cursor, else after cursor,
// moved forward within the replay bounds; capped says so when it was.
func (s *Server) eventsStart(ctx context.Context, cursor string) (start string, capped *ReplayCapped, err error) {
	if cursor == "" {
		_, start, err = s.client.WatchNotifications(ctx, "", 0)
		return start, nil, err
	}
	start, skipped, err := s.client.ResumeNotifications(ctx, cursor, s.cfg.EventReplayEntries, s.cfg.EventReplayAge)
	if err != nil {
		return "", nil, err
	}
	if skipped {
		capped = &ReplayCapped{LastEventID: cursor, ResumedAfter: start}
	}
	return start, capped, nil
}

// sseWriter writes an event stream. Every write and flush must get
// through within the write timeout: a client that does not read would
// otherwise hold the connection, and what the kernel buffers for it, for
// ever.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	// err is the error of the last write or flush.
	err error
}

// write writes to the stream; it says whether that went through.
func (sw *sseWriter) write(format string, args ...any) bool {
	_ = sw.rc.SetWriteDeadline(time.Now().Add(sw.timeout)) //nolint:forbidigo // a connection's deadline is wall-clock time
	_, sw.err = fmt.Fprintf(sw.w, format, args...)
	return sw.err == nil
}

// flush sends what was written; it says whether that went through.
func (sw *sseWriter) flush() bool {
	_ = sw.rc.SetWriteDeadline(time.Now().Add(sw.timeout)) //nolint:forbidigo // as in write
	sw.err = sw.rc.Flush()
	return sw.err == nil
}

// begin sends the stream's headers, its retry interval and, if its replay
// was capped, the replay_capped event; it says whether that went through.
func (sw *sseWriter) begin(capped *ReplayCapped) bool {
	h := sw.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	sw.w.WriteHeader(http.StatusOK)
	if !sw.write("retry: 2000\n: stream of run events\n\n") {
		return false
	}
	if capped != nil {
		data, _ := json.Marshal(capped)
		if !sw.write(": replay capped\n\nevent: replay_capped\ndata: %s\n\n", data) {
			return false
		}
	}
	return sw.flush()
}

// sendNotifications sends everything after cursor that the caller p may
// see, and returns the new cursor; ok is false when the client is gone.
// A failed read is logged and left for the next wake-up.
func (s *Server) sendNotifications(ctx context.Context, sw *sseWriter, p Principal, log *slog.Logger,
	cursor string,
) (string, bool) {
	for {
		ns, err := s.client.Notifications(ctx, cursor, 100)
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("event stream: cannot read notifications; retrying on the next wake-up", "error", err)
			}
			return cursor, true
		}
		for _, n := range ns {
			cursor = n.ID
			if !p.CanSee(n.Owner) {
				continue
			}
			data, err := json.Marshal(streamEvent(n))
			if err != nil {
				continue
			}
			if !sw.write("id: %s\nevent: %s\ndata: %s\n\n", n.ID, n.Type, data) {
				return cursor, false
			}
		}
		if len(ns) > 0 && !sw.flush() {
			return cursor, false
		}
		if len(ns) < 100 {
			return cursor, true
		}
	}
}

// streamSlots counts the open event streams of each subject, against the
// limit Config.EventStreamsPerSubject.
type streamSlots struct {
	limit int

	mu   sync.Mutex
	open map[string]int
}

func newStreamSlots(limit int) *streamSlots {
	return &streamSlots{limit: limit, open: map[string]int{}}
}

// acquire takes one of subject's slots, if one is free, and returns the
// function that gives it back; open is how many subject has open, the new
// one included.
func (c *streamSlots) acquire(subject string) (release func(), open int, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.open[subject]
	if n >= c.limit {
		return nil, n, false
	}
	c.open[subject] = n + 1
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.open[subject]--; c.open[subject] <= 0 {
				delete(c.open, subject)
			}
		})
	}, n + 1, true
}

// count returns how many streams subject has open.
func (c *streamSlots) count(subject string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open[subject]
}

// hub is the one goroutine that waits on the notification stream (XREAD
// BLOCK, holding one Redis connection) and wakes every event stream when
// something arrives; each stream then reads on from its own cursor. It runs
// while at least one stream is open.
type hub struct {
	client *workflow.Client
	log    *slog.Logger

	mu     sync.Mutex
	subs   map[chan struct{}]struct{}
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// hubBlock is how long one wait on the stream lasts; a hub whose last
// stream closed ends within it.
const hubBlock = time.Second

func newHub(c *workflow.Client, log *slog.Logger) *hub {
	return &hub{client: c, log: log, subs: map[chan struct{}]struct{}{}}
}

// subscribe returns a channel that receives a value when notifications may
// have arrived, and the function that ends the subscription.
func (h *hub) subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	h.subs[ch] = struct{}{}
	if h.cancel == nil {
		ctx, cancel := context.WithCancel(context.Background())
		h.cancel = cancel
		h.wg.Go(func() { h.run(ctx) })
	}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.subs, ch)
		if len(h.subs) == 0 && h.cancel != nil {
			h.cancel()
			h.cancel = nil
		}
	}
}

func (h *hub) wakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
}

func (h *hub) run(ctx context.Context) {
	cursor := ""
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		block := hubBlock
		if cursor == "" {
			block = 0 // just find the starting point
		}
		ns, next, err := h.client.WatchNotifications(ctx, cursor, block)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			h.log.Warn("event streams: cannot read the notification stream; retrying", "error", err, "retry_in", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		started := cursor == ""
		cursor = next
		// Once the starting point is known, wake every stream: one that
		// read just before it was found may have missed an entry.
		if started || len(ns) > 0 {
			h.wakeAll()
		}
	}
}

// stop ends the hub's goroutine, if it runs, and waits for it.
func (h *hub) stop() {
	h.mu.Lock()
	if h.cancel != nil {
		h.cancel()
		h.cancel = nil
	}
	h.mu.Unlock()
	h.wg.Wait()
}
