package engine

import (
	"context"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/core"
	"github.com/cairnhq/cairn/retrystate"
)

// Bounded reads for dashboards: how many runs were created when, and in
// what status they are; the newest runs' heads; the notifications of a
// recent window; the admission gates in use. Each reads a bounded amount,
// whatever the queue holds.

// MaxCountBuckets bounds the buckets of one CountCreated.
const MaxCountBuckets = retrystate.MaxCountBuckets

// CountCreated counts, for each run status, the runs created in each bucket
// [edges[i], edges[i+1]) that still exist (finished runs count until they
// expire), from the status indexes: one ZCOUNT per status and bucket, in
// one round trip. edges must be increasing, at most MaxCountBuckets+1.
func (c *Client) CountCreated(ctx context.Context, edges []time.Time) (map[core.RunStatus][]int64, error) {
	return c.store.CountCreated(ctx, edges)
}

// RunStamp is a run as ScanRuns reads it: when it was created, its status,
// owner and workflow.
type RunStamp struct {
	ID        string
	CreatedAt time.Time
	Status    core.RunStatus
	Owner     string
	Workflow  string
}

// MaxRunScan bounds the runs one ScanRuns reads.
const MaxRunScan = retrystate.MaxStampScan

// ScanRuns reads the newest runs created at or after since (zero: any
// time), newest first, at most limit of them (at most MaxRunScan), without
// their steps or input. more tells whether older runs of the window were
// left unread.
func (c *Client) ScanRuns(ctx context.Context, since time.Time, limit int) (runs []RunStamp, more bool, err error) {
	st, more, err := c.store.ScanStamps(ctx, since, limit)
	if err != nil {
		return nil, false, err
	}
	out := make([]RunStamp, len(st))
	for i, s := range st {
		out[i] = RunStamp{ID: s.ID, CreatedAt: s.CreatedAt.UTC(), Status: s.Status, Owner: s.Owner, Workflow: s.Workflow}
	}
	return out, more, nil
}

// MaxRecentNotifications bounds the notifications one RecentNotifications
// reads.
const MaxRecentNotifications = retrystate.MaxRecentNotifications

// RecentNotifications returns the notifications of the last window by the
// client's clock, newest first, at most limit of them (at most
// MaxRecentNotifications); more tells whether older ones of the window
// were left unread. The notification stream keeps the newest 100,000 or so
// entries: a window longer than that history reaches back only as far.
func (c *Client) RecentNotifications(ctx context.Context, window time.Duration, limit int) (ns []Notification, more bool, err error) {
	rs, more, err := c.store.RecentNotifications(ctx, c.cfg.Clock.Now().Add(-window), limit)
	if err != nil {
		return nil, false, err
	}
	out := make([]Notification, len(rs))
	for i, n := range rs {
		out[i] = notificationFrom(n)
	}
	return out, more, nil
}

// ErrQueueNodeUnknown says a Redis Cluster names no master for the slot of the
// queue's keys (PingQueue).
var ErrQueueNodeUnknown = retrystate.ErrQueueNodeUnknown

// PingQueue checks that the node of rdb that holds queue's keys serves
// them, reading a key of the queue's slot on that node alone: on a Redis
// Cluster the master that owns the slot of the queue's hash tag (another
// node answering is not enough; the error wraps ErrQueueNodeUnknown when
// the cluster names none), otherwise the server (for Sentinel, the current
// master). A readiness check.
func PingQueue(ctx context.Context, rdb redis.UniversalClient, queue string) error {
	return retrystate.New(rdb, queue).PingQueue(ctx)
}

// GateUsage is an admission gate in use: an ordering key's line
// (OrderingKey set) or a workflow's max_running (Workflow set), with how
// many runs hold a slot of it (Admitted) and wait in its line (Waiting).
type GateUsage struct {
	OrderingKey string `json:"ordering_key,omitempty"`
	// Owner is the owner of an ordering key's line; "" for a key's shared
	// line (StartOptions.SharedOrdering).
	Owner     string    `json:"owner,omitempty"`
	Workflow  string    `json:"workflow,omitempty"`
	Admitted  int64     `json:"admitted"`
	Waiting   int64     `json:"waiting"`
	ChangedAt time.Time `json:"changed_at"`
}

// MaxGates bounds the gates one Gates returns.
const MaxGates = retrystate.MaxGates

// Gates returns up to limit admission gates in use (at most MaxGates), most
// recently used first, and how many are in use in all.
func (c *Client) Gates(ctx context.Context, limit int) ([]GateUsage, int64, error) {
	gs, total, err := c.store.Gates(ctx, limit)
	if err != nil {
		return nil, 0, err
	}
	out := make([]GateUsage, 0, len(gs))
	for _, g := range gs {
		u := GateUsage{Admitted: g.Admitted, Waiting: g.Waiting, ChangedAt: g.ChangedAt.UTC()}
		switch {
		case strings.HasPrefix(g.Gate, retrystate.KeyGate("")):
			u.OrderingKey, u.Owner, _ = retrystate.SplitOrderingKey(strings.TrimPrefix(g.Gate, retrystate.KeyGate("")))
		case strings.HasPrefix(g.Gate, retrystate.WorkflowGate("")):
			u.Workflow = strings.TrimPrefix(g.Gate, retrystate.WorkflowGate(""))
		default:
			continue
		}
		out = append(out, u)
	}
	return out, total, nil
}
