package engine

import (
	"context"
	"time"

	"github.com/cairnhq/cairn/tasks"
)

// Kinds of WorkerInfo: a worker on Cairn's own dequeue, or an asynq server
// (CAIRN_DEQUEUE=asynq, or a service's server that embeds the engine).
const (
	WorkerKindCairn = tasks.KindCairn
	WorkerKindAsynq = tasks.KindAsynq
)

// MaxWorkers bounds the workers of each kind one Client.Workers returns.
const MaxWorkers = tasks.MaxWorkers

// WorkerInfo is a live worker of the client's queue, as Client.Workers
// reads it: host names and pids, operators' data.
type WorkerInfo struct {
	// ID is the worker's identity: host:pid:random on Cairn's own dequeue
	// (the worker its attempts' journal entries name), asynq's
	// host:pid:server-id for an asynq server.
	ID string `json:"id"`
	// Kind is WorkerKindCairn or WorkerKindAsynq ("asynq server").
	Kind        string   `json:"kind"`
	Host        string   `json:"host"`
	PID         int      `json:"pid"`
	Queues      []string `json:"queues"`
	Concurrency int      `json:"concurrency"`
	// InFlight is how many tasks the worker runs (of the queue, for an
	// asynq server), as of its last heartbeat (once a second on Cairn's
	// dequeue, every 5 s for asynq).
	InFlight  int       `json:"in_flight"`
	StartedAt time.Time `json:"started_at"`
	// Version is Cairn's version in the worker (WorkerConfig.Version);
	// empty for an asynq server.
	Version string `json:"version,omitempty"`
	// LastHeartbeat is the worker's last heartbeat, HeartbeatExpires when
	// it ends unless renewed; nil for an asynq server (its records do not
	// say).
	LastHeartbeat    *time.Time `json:"last_heartbeat,omitempty"`
	HeartbeatExpires *time.Time `json:"heartbeat_expires,omitempty"`
	// Status is an asynq server's status ("active", "stopped", ...);
	// empty on Cairn's dequeue.
	Status string `json:"status,omitempty"`
}

// Workers returns the live workers of the client's queue at the client's
// clock: the workers on Cairn's own dequeue whose heartbeat has not
// expired, with the record each heartbeat rewrites, then the asynq servers
// that serve the queue, from asynq's own records; at most MaxWorkers of
// each, more telling whether some were left out.
func (c *Client) Workers(ctx context.Context) (ws []WorkerInfo, more bool, err error) {
	infos, more, err := tasks.Workers(ctx, c.rdb, c.cfg.Queue, c.cfg.Clock.Now())
	if err != nil {
		return nil, false, err
	}
	ws = make([]WorkerInfo, len(infos))
	for i, w := range infos {
		ws[i] = WorkerInfo{ID: w.ID, Kind: w.Kind, Host: w.Host, PID: w.PID, Queues: w.Queues, Concurrency: w.Concurrency,
			InFlight: w.InFlight, StartedAt: w.StartedAt, Version: w.Version, Status: w.Status}
		if ws[i].Queues == nil {
			ws[i].Queues = []string{}
		}
		if !w.Heartbeat.IsZero() {
			ws[i].LastHeartbeat = &w.Heartbeat
		}
		if !w.Expires.IsZero() {
			ws[i].HeartbeatExpires = &w.Expires
		}
	}
	return ws, more, nil
}

// Served tells whether a live worker serves the client's queue: one ZCOUNT
// of the heartbeat set of Cairn's own dequeue, and of asynq's server set,
// in one round trip (asynq's server records are read only when an asynq
// server is alive and no worker on Cairn's dequeue is). A run waits,
// pending, until one does.
func (c *Client) Served(ctx context.Context) (bool, error) {
	return tasks.Served(ctx, c.rdb, c.cfg.Queue, c.cfg.Clock.Now())
}
