package testsignal_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/cairnhq/cairn/internal/testsignal"
)

func TestSignal(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var s testsignal.Signal[int]
		s.Signal(1) // disabled: dropped, does not block
		if _, ok := s.Wait(time.Second); ok {
			t.Fatal("a disabled signal delivered a value")
		}
		s.Init()
		s.Signal(2)
		s.Signal(3)
		if v, ok := s.Wait(time.Second); !ok || v != 2 {
			t.Fatalf("first wait: %d %v, want 2", v, ok)
		}
		if v, ok := s.Wait(time.Second); !ok || v != 3 {
			t.Fatalf("second wait: %d %v, want 3", v, ok)
		}
		start := time.Now()
		if _, ok := s.Wait(time.Minute); ok || time.Since(start) != time.Minute {
			t.Fatalf("an empty signal: ok %v after %s, want false after exactly 1m", ok, time.Since(start))
		}
		for i := range 2000 { // more than the buffer: never blocks
			s.Signal(i)
		}
	})
}
