package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
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

// events serves GET /api/v1/events: Server-Sent Events of the transitions
// of the caller's runs (every run for an admin), from the queue's
// notification stream. Each event has the notification's stream ID as its
// id, its type as event name, and a StreamEvent as JSON data. A client that
// reconnects with Last-Event-ID (or ?last_event_id=) gets what it missed,
// as far as the stream retains it; otherwise the stream starts with the
// next notification. A comment line every Config.Heartbeat keeps idle
// connections open.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	cursor := r.Header.Get("Last-Event-ID")
	if cursor == "" {
		cursor = r.URL.Query().Get("last_event_id")
	}
	var after streamID
	if cursor != "" {
		id, err := streamIDParam("Last-Event-ID", cursor)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		after, cursor = id, id.String()
	}
	ctx := r.Context()
	p := principal(r)
	// Subscribe before reading: a notification added from now on wakes
	// this stream, and anything earlier is in the first read.
	wake, unsubscribe := s.hub.subscribe()
	defer unsubscribe()
	// The newest notification: the start of a new stream, and of one
	// resuming after an ID the stream has not reached (which would wait
	// for the clock to get there).
	_, newest, err := s.client.WatchNotifications(ctx, "", 0)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if cursor == "" {
		cursor = newest
	} else if n, err := parseStreamID(newest); err == nil && n.less(after) {
		cursor = newest
	}
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // a stream outlives the server's write timeout
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprint(w, "retry: 2000\n: stream of run events\n\n"); err != nil || rc.Flush() != nil {
		return
	}
	log := reqLog(r)
	heartbeat := time.NewTicker(s.cfg.Heartbeat)
	defer heartbeat.Stop()
	for {
		// Send everything after cursor that the caller may see.
		for {
			ns, err := s.client.Notifications(ctx, cursor, 100)
			if err != nil {
				if ctx.Err() == nil {
					log.Warn("event stream: cannot read notifications; retrying on the next wake-up", "error", err)
				}
				break
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
				if _, err := fmt.Fprintf(w, "id: %s\nevent: %s\ndata: %s\n\n", n.ID, n.Type, data); err != nil {
					return
				}
			}
			if len(ns) > 0 && rc.Flush() != nil {
				return
			}
			if len(ns) < 100 {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-heartbeat.C:
			// The comment keeps proxies from closing an idle stream; the
			// loop then also reads, in case a wake-up was lost.
			if _, err := fmt.Fprint(w, ": heartbeat\n\n"); err != nil || rc.Flush() != nil {
				return
			}
		}
	}
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
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			h.run(ctx)
		}()
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
