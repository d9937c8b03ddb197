// Package embedded runs the in-process development store: a miniredis
// server on a fixed loopback address, used when CAIRN_REDIS_URL is unset.
// Nothing it holds survives the process; it is for trying Cairn out.
package embedded

import (
	"fmt"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// Store is a running embedded store.
type Store struct {
	m    *miniredis.Miniredis
	stop chan struct{}
	wg   sync.WaitGroup
}

// Start listens on addr (host:port). miniredis does not expire keys by
// itself, so the store advances its clock in real time.
func Start(addr string) (*Store, error) {
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr(addr); err != nil {
		return nil, fmt.Errorf("embedded store: listen on %s: %w (is another worker running? set CAIRN_EMBEDDED_ADDR or CAIRN_REDIS_URL)", addr, err)
	}
	s := &Store{m: m, stop: make(chan struct{})}
	s.wg.Add(1)
	go s.tick()
	return s, nil
}

func (s *Store) tick() {
	defer s.wg.Done()
	const every = 100 * time.Millisecond
	t := time.NewTicker(every)
	defer t.Stop()
	last := time.Now() //nolint:forbidigo // miniredis's clock follows the wall clock: the point of this ticker
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			s.m.SetTime(now)
			s.m.FastForward(now.Sub(last))
			last = now
		}
	}
}

// Addr returns the address the store listens on.
func (s *Store) Addr() string { return s.m.Addr() }

// URL returns the redis:// URL of the store.
func (s *Store) URL() string { return "redis://" + s.m.Addr() }

// Close stops the store; its data is gone.
func (s *Store) Close() {
	close(s.stop)
	s.wg.Wait()
	s.m.Close()
}
