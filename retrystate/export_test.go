package retrystate

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// What the package's external tests (package retrystate_test) use of its
// unexported surface.

// AuditMaxLen is auditMaxLen.
const AuditMaxLen = auditMaxLen

// OutcomeRefused is a script's outcome that the Store returns as an error
// (RefusedError), which the tests drive the scripts into.
const OutcomeRefused = outcomeRefused

// Queue returns the queue name the store works on.
func (s *Store) Queue() string { return s.keys.queue }

// Redis returns the client the store uses.
func (s *Store) Redis() redis.UniversalClient { return s.rdb }

// Template is template.
func (s *Store) Template(ctx context.Context, sha string) (map[string]string, error) {
	return s.template(ctx, sha)
}

// BatchQueued is the number of step-path calls waiting for the batch on the
// wire (batch.go).
func (s *Store) BatchQueued() int {
	s.batch.mu.Lock()
	defer s.batch.mu.Unlock()
	return len(s.batch.queue)
}

// BatchIdle tells whether no batch is being sent.
func (s *Store) BatchIdle() bool {
	s.batch.mu.Lock()
	defer s.batch.mu.Unlock()
	return !s.batch.sending
}
