package retrystate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Store reads and writes the workflow state of one queue.
type Store struct {
	rdb     redis.UniversalClient
	keys    keys
	scripts scripts
	// templates holds the definition templates read (definitions.go), by
	// version: they never change.
	templates sync.Map
	// queueAdded: this store added its queue to asynq's set of queues
	// (CreateRuns), as asynq's own enqueue does.
	queueAdded atomic.Bool
	// batch sends the step path's calls made at once in one round trip
	// (batch.go).
	batch *batcher
}

// New returns the Store of queue on rdb.
func New(rdb redis.UniversalClient, queue string) *Store {
	return &Store{rdb: rdb, keys: newKeys(queue), scripts: loadScripts(), batch: &batcher{rdb: rdb}}
}

// runArgs returns the run-level arguments of a script acting on run runID
// (args.go).
func (s *Store) runArgs(runID string, now time.Time) runArgs {
	return runArgs{Run: s.keys.run(runID), RunID: runID, Prefix: s.keys.prefix, Now: ms(now)}
}

// run runs script sc with the KEYS and ARGV of a.
func (s *Store) run(ctx context.Context, sc *redis.Script, a luaArgs) ([]string, error) {
	keys, argv := a.args()
	res, err := sc.Run(ctx, s.rdb, keys, argv...).Result()
	if err != nil {
		return nil, err
	}
	return toStrings(res)
}

// runBatched runs script sc as run does, in one round trip with the other
// calls of the step path made at the same time (batch.go).
func (s *Store) runBatched(ctx context.Context, sc *redis.Script, a luaArgs) ([]string, error) {
	keys, argv := a.args()
	res, err := s.batch.run(ctx, sc, keys, argv)
	if err != nil {
		return nil, err
	}
	return toStrings(res)
}

func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func toStrings(res any) ([]string, error) {
	arr, ok := res.([]any)
	if !ok || len(arr) == 0 {
		return nil, fmt.Errorf("%w: %v", ErrUnexpectedReply, res)
	}
	out := make([]string, len(arr))
	for i, v := range arr {
		switch x := v.(type) {
		case string:
			out[i] = x
		case int64:
			out[i] = strconv.FormatInt(x, 10)
		case nil:
			out[i] = ""
		default:
			return nil, fmt.Errorf("%w: an element of type %T", ErrUnexpectedReply, v)
		}
	}
	return out, nil
}

// ErrQueueNodeUnknown says a Redis Cluster names no master for the slot of the
// queue's keys (it is down, or failing over).
var ErrQueueNodeUnknown = errors.New("no Redis Cluster master is known for the queue's slot")

// PingQueue checks that the Redis node that holds the queue's keys serves
// them: it reads a key of the queue's slot on that node alone. On a Redis
// Cluster that is the master that owns the slot of the queue's hash tag, so
// a cluster that is down, a failed or unreachable master, or a node that no
// longer owns the slot fails (another node answering is not enough; the
// error wraps ErrQueueNodeUnknown when no master is known); otherwise it is
// the server (for Sentinel, the current master).
func (s *Store) PingQueue(ctx context.Context) error {
	key := s.keys.asynqPending() // any key of the slot
	var node redis.Cmdable = s.rdb
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		m, err := cc.MasterForKey(ctx, key)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrQueueNodeUnknown, err)
		}
		node = m
	}
	return node.Exists(ctx, key).Err()
}
