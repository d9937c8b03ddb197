package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// The queue's live workers, for operators (the Workers page, GET
// /api/v1/workers, enqueue workers) and the "no live worker" notice.
//
// A worker on Cairn's own dequeue is alive while its heartbeat in
// cairn:{q}:fetchers (Keys.Fetchers) has not expired; each heartbeat
// (Dequeuer.Housekeep, once a second, off the step path) also rewrites its
// record, cairn:{q}:worker:<id> (Keys.WorkerRecord), with the heartbeat's
// TTL, so that a killed worker's record expires on its own; a clean exit
// (Dequeuer.Leave) deletes it. A worker on asynq's processor
// (CAIRN_DEQUEUE=asynq), or a service's asynq server that embeds the
// engine, has no such heartbeat: it is read from asynq's own server
// records (asynq's Inspector.Servers), which asynq renews every few
// seconds.

// Kinds of WorkerInfo.
const (
	// KindCairn is a worker on Cairn's own dequeue.
	KindCairn = "cairn"
	// KindAsynq is an asynq server that serves the queue.
	KindAsynq = "asynq"
)

// MaxWorkers bounds the workers of each kind one Workers call reads.
const MaxWorkers = 500

// WorkerInfo is what a worker tells of itself.
type WorkerInfo struct {
	// ID is the worker's identity: host:pid:random on Cairn's own
	// dequeue (the worker named in its attempts' journal entries), asynq's
	// host:pid:server-id for an asynq server.
	ID string
	// Kind is KindCairn or KindAsynq.
	Kind        string
	Host        string
	PID         int
	Queues      []string
	Concurrency int
	// InFlight is how many tasks the worker runs now (of the queue, for
	// an asynq server), as of its last heartbeat.
	InFlight  int
	StartedAt time.Time
	// Version is Cairn's version in the worker; "" for an asynq server.
	Version string
	// Heartbeat is the worker's last heartbeat, Expires when it ends
	// (zero for an asynq server, whose records do not say).
	Heartbeat, Expires time.Time
	// Status is an asynq server's ("active", "stopped", ...); "" on
	// Cairn's dequeue.
	Status string
}

// fields are the record's fields and values, for housekeep.lua.
func (w WorkerInfo) fields() []any {
	q, _ := json.Marshal(w.Queues)
	return []any{"host", w.Host, "pid", w.PID, "queues", string(q), "concurrency", w.Concurrency,
		"in_flight", w.InFlight, "started_at", w.StartedAt.UnixMilli(), "version", w.Version,
		"heartbeat", w.Heartbeat.UnixMilli()}
}

// parseRecord reads a worker's record (its fields as housekeep.lua wrote
// them); a field missing or unreadable stays zero.
func parseRecord(id string, expires time.Time, h map[string]string) WorkerInfo {
	w := WorkerInfo{ID: id, Kind: KindCairn, Host: h["host"], Version: h["version"], Expires: expires}
	w.PID, _ = strconv.Atoi(h["pid"])
	w.Concurrency, _ = strconv.Atoi(h["concurrency"])
	w.InFlight, _ = strconv.Atoi(h["in_flight"])
	if ms, err := strconv.ParseInt(h["started_at"], 10, 64); err == nil && ms > 0 {
		w.StartedAt = time.UnixMilli(ms).UTC()
	}
	if ms, err := strconv.ParseInt(h["heartbeat"], 10, 64); err == nil && ms > 0 {
		w.Heartbeat = time.UnixMilli(ms).UTC()
	}
	_ = json.Unmarshal([]byte(h["queues"]), &w.Queues)
	if w.Host == "" { // no record (yet, or an older worker's): what the ID tells
		if host, rest, ok := strings.Cut(id, ":"); ok {
			w.Host = host
			pid, _, _ := strings.Cut(rest, ":")
			w.PID, _ = strconv.Atoi(pid)
		}
	}
	return w
}

// Workers returns the live workers of queue at now: those on Cairn's own
// dequeue whose heartbeat has not expired, with their records, then the
// asynq servers that serve the queue, each sorted by ID, at most
// MaxWorkers of each; more tells whether some were left out. Two round
// trips, and asynq's Inspector.Servers.
func Workers(ctx context.Context, rdb redis.UniversalClient, queue string, now time.Time) (ws []WorkerInfo, more bool, err error) {
	k := QueueKeys(queue)
	zs, err := rdb.ZRangeByScoreWithScores(ctx, k.Fetchers(), &redis.ZRangeBy{
		Min: "(" + strconv.FormatInt(now.UnixMilli(), 10), Max: "+inf", Count: MaxWorkers + 1}).Result()
	if err != nil {
		return nil, false, err
	}
	if len(zs) > MaxWorkers {
		zs, more = zs[:MaxWorkers], true
	}
	if len(zs) > 0 {
		ids := make([]string, len(zs))
		for i, z := range zs {
			ids[i], _ = z.Member.(string) // ZRANGE answers strings
		}
		cmds := make([]*redis.MapStringStringCmd, len(zs))
		_, err = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, id := range ids {
				cmds[i] = p.HGetAll(ctx, k.WorkerRecord(id))
			}
			return nil
		})
		if err != nil {
			return nil, false, err
		}
		for i, z := range zs {
			ws = append(ws, parseRecord(ids[i], time.UnixMilli(int64(z.Score)).UTC(), cmds[i].Val()))
		}
	}
	slices.SortFunc(ws, func(a, b WorkerInfo) int { return strings.Compare(a.ID, b.ID) })
	as, err := asynqServers(rdb, queue)
	if err != nil {
		return nil, false, err
	}
	if len(as) > MaxWorkers {
		as, more = as[:MaxWorkers], true
	}
	return append(ws, as...), more, nil
}

// Served tells whether a live worker serves queue at now: one on Cairn's
// own dequeue (one ZCOUNT of its heartbeat set, as the cairn_workers
// metric reads it), or an asynq server (one ZCOUNT of asynq's server set,
// in the same round trip; only when some asynq server is alive and no
// Cairn worker is are its records read, to see whether one serves queue).
func Served(ctx context.Context, rdb redis.UniversalClient, queue string, now time.Time) (bool, error) {
	var own, servers *redis.IntCmd
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		own = p.ZCount(ctx, QueueKeys(queue).Fetchers(), "("+strconv.FormatInt(now.UnixMilli(), 10), "+inf")
		servers = p.ZCount(ctx, AllServers, strconv.FormatInt(now.Unix(), 10), "+inf")
		return nil
	})
	if err != nil {
		return false, err
	}
	if own.Val() > 0 {
		return true, nil
	}
	if servers.Val() == 0 {
		return false, nil
	}
	as, err := asynqServers(rdb, queue)
	return len(as) > 0, err
}

// asynqServers returns the live asynq servers that serve queue, by ID.
func asynqServers(rdb redis.UniversalClient, queue string) ([]WorkerInfo, error) {
	ss, err := asynq.NewInspectorFromRedisClient(rdb).Servers()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	var out []WorkerInfo
	for _, s := range ss {
		if _, ok := s.Queues[queue]; !ok {
			continue
		}
		w := WorkerInfo{ID: s.Host + ":" + strconv.Itoa(s.PID) + ":" + s.ID, Kind: KindAsynq, Host: s.Host, PID: s.PID,
			Concurrency: s.Concurrency, StartedAt: s.Started.UTC(), Status: s.Status}
		for q := range s.Queues {
			w.Queues = append(w.Queues, q)
		}
		slices.Sort(w.Queues)
		for _, a := range s.ActiveWorkers {
			if a.Queue == queue {
				w.InFlight++
			}
		}
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b WorkerInfo) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}
