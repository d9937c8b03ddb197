package retrystate_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/retrystate"
)

// TestCheckFormat: a queue records its data format on first use, a queue
// of this format passes, and one of another format, or with a record that
// is not a version, is refused with what to do and nothing written.
func TestCheckFormat(t *testing.T) {
	t.Run("new queue records this version", func(t *testing.T) {
		s, rdb := newStore(t)
		if err := s.CheckFormat(ctxb, true); err != nil {
			t.Fatal(err)
		}
		key := "cairn:{" + s.Queue() + "}:format"
		if got := rdb.Get(ctxb, key).Val(); got != "1" {
			t.Fatalf("%s = %q, want %q", key, got, "1")
		}
		if err := s.CheckFormat(ctxb, true); err != nil {
			t.Fatalf("second check: %v", err)
		}
	})
	t.Run("a client's check records nothing", func(t *testing.T) {
		s, rdb := newStore(t)
		if err := s.CheckFormat(ctxb, false); err != nil {
			t.Fatal(err)
		}
		if n := rdb.Exists(ctxb, "cairn:{"+s.Queue()+"}:format").Val(); n != 0 {
			t.Fatal("CheckFormat without record wrote the format record")
		}
	})
	t.Run("data from before versions is version 1", func(t *testing.T) {
		s, rdb := newStore(t)
		create(t, s, runID(1), t0, "a")
		key := "cairn:{" + s.Queue() + "}:format"
		if rdb.Exists(ctxb, key).Val() != 0 {
			t.Fatalf("premise: creating a run recorded %s", key)
		}
		if err := s.CheckFormat(ctxb, true); err != nil {
			t.Fatal(err)
		}
		if got := rdb.Get(ctxb, key).Val(); got != "1" {
			t.Fatalf("%s = %q, want 1", key, got)
		}
	})
	for _, tc := range []struct {
		name, recorded string
		found          int
		says           string
	}{
		{"newer", "7", 7, "run a Cairn release that reads format 7"},
		{"not a version", "v1", 0, `holds "v1", not a version`},
		{"zero", "0", 0, "not a version"},
		{"padded", "01", 0, "not a version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, rdb := newStore(t)
			key := "cairn:{" + s.Queue() + "}:format"
			rdb.Set(ctxb, key, tc.recorded, 0)
			err := s.CheckFormat(ctxb, true)
			if err2 := s.CheckFormat(ctxb, false); !errors.Is(err2, retrystate.ErrDataFormat) {
				t.Fatalf("a client's check = %v, want ErrDataFormat", err2)
			}
			var fe *retrystate.FormatError
			if !errors.As(err, &fe) || !errors.Is(err, retrystate.ErrDataFormat) {
				t.Fatalf("CheckFormat = %v, want a *FormatError", err)
			}
			if fe.Found != tc.found || fe.Known != retrystate.FormatVersion || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("error %+v %q: want found %d and %q", fe, err, tc.found, tc.says)
			}
			if got := rdb.Get(ctxb, key).Val(); got != tc.recorded {
				t.Fatalf("the refusal wrote %s = %q", key, got)
			}
		})
	}
}

// TestCheckFormatConcurrent: processes that check a new queue at the same
// time all pass, and the queue records one version.
func TestCheckFormatConcurrent(t *testing.T) {
	s, rdb := newStore(t)
	errs := make(chan error, 8)
	for range 8 {
		go func() { errs <- s.CheckFormat(ctxb, true) }()
	}
	deadline := time.After(30 * time.Second)
	for range 8 {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
		case <-deadline:
			t.Fatal("CheckFormat did not return")
		}
	}
	if got := rdb.Get(ctxb, "cairn:{"+s.Queue()+"}:format").Val(); got != "1" {
		t.Fatalf("recorded %q", got)
	}
}
