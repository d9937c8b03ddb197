package retrystate

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// The reconciler's locks.

// Lock names.
const (
	LockReconcile = "reconcile"
	LockSweep     = "sweep"
)

func (s *Store) lockKey(name string) string {
	if name == LockSweep {
		return s.keys.sweepLock()
	}
	return s.keys.reconcileLock()
}

// TryLock takes the named lock for ttl if nobody holds it, or extends it
// when the caller holds it already: a caller that keeps its token across
// tries gets back a lock it took whose reply was lost.
func (s *Store) TryLock(ctx context.Context, name, token string, ttl time.Duration) (bool, error) {
	ok, err := s.rdb.SetNX(ctx, s.lockKey(name), token, ttl).Result()
	if errors.Is(err, redis.Nil) {
		ok, err = false, nil
	}
	if err != nil || ok {
		return ok, err
	}
	return s.ExtendLock(ctx, name, token, ttl)
}

// ExtendLock extends a lock the caller holds; false when it lost it.
func (s *Store) ExtendLock(ctx context.Context, name, token string, ttl time.Duration) (bool, error) {
	keys, argv := unlockLua{Lock: s.lockKey(name), Token: token, TTL: ttl.Milliseconds()}.args()
	n, err := s.scripts.unlock.Run(ctx, s.rdb, keys, argv...).Int()
	return n == 1, err
}

// Unlock releases a lock the caller holds.
func (s *Store) Unlock(ctx context.Context, name, token string) error {
	keys, argv := unlockLua{Lock: s.lockKey(name), Token: token}.args()
	return s.scripts.unlock.Run(ctx, s.rdb, keys, argv...).Err()
}
