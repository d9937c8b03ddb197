package retrystate

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// FormatVersion is the version of the layout of a queue's data (its keys,
// the fields of its run hashes, what its scripts read and write) that this
// code reads and writes. A queue records its version in cairn:{q}:format;
// a change of layout that code of an earlier version would misread raises
// it, with a migration from the one before (docs/upgrading.md).
//
// Version 1 is the layout of every Cairn before the version was recorded: a
// queue with data and no recorded version is of version 1.
const FormatVersion = 1

// ErrDataFormat is wrapped by CheckFormat's refusals (a *FormatError).
var ErrDataFormat = errors.New("the queue's data is of another format")

// FormatError is CheckFormat's refusal: the queue's data is of a format
// this code does not read.
type FormatError struct {
	Queue string
	// Found is the queue's recorded version (0 when the recorded value is
	// not a version: Raw); Known is FormatVersion.
	Found, Known int
	Raw          string
}

func (e *FormatError) Error() string {
	switch {
	case e.Found == 0:
		return fmt.Sprintf("queue %q: its data format record cairn:{%s}:format holds %q, not a version: "+
			"it was not written by Cairn; nothing was read or written", e.Queue, e.Queue, e.Raw)
	case e.Found > e.Known:
		return fmt.Sprintf("queue %q holds data of format %d, and this Cairn reads format %d: "+
			"run a Cairn release that reads format %d (docs/upgrading.md); nothing was read or written",
			e.Queue, e.Found, e.Known, e.Found)
	default:
		return fmt.Sprintf("queue %q holds data of format %d, and this Cairn reads format %d: "+
			"stop the workers of the older release, then migrate the queue (docs/upgrading.md); "+
			"nothing was read or written", e.Queue, e.Found, e.Known)
	}
}

// Unwrap makes errors.Is(err, ErrDataFormat) true.
func (e *FormatError) Unwrap() error { return ErrDataFormat }

// CheckFormat checks that the queue's data is of FormatVersion. A queue that
// recorded no version yet is of version 1 when it has data (from before
// versions were recorded) and of any version when it has none; with record,
// that version is recorded (a queue without data takes this code's). Data
// of another version is refused with a *FormatError that says what to do,
// and nothing is written. One or two round trips: workers check, recording,
// before they publish; clients check, without recording, when they read a
// definition.
func (s *Store) CheckFormat(ctx context.Context, record bool) error {
	pipe := s.rdb.Pipeline()
	rec := pipe.Get(ctx, s.keys.format())
	// Data of a queue that recorded no version: its definitions or runs.
	data := pipe.Exists(ctx, s.keys.definitionVersions(), s.keys.all())
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("read the queue's data format: %w", err)
	}
	raw, err := rec.Result()
	switch {
	case errors.Is(err, redis.Nil):
		version := FormatVersion
		if data.Val() > 0 {
			version = 1
		}
		if version == FormatVersion && !record {
			return nil
		}
		if version == FormatVersion {
			// Another process may record it at the same time: SETNX keeps
			// the first, which is the same version or is read below.
			if err := s.rdb.SetNX(ctx, s.keys.format(), strconv.Itoa(version), 0).Err(); err != nil {
				return fmt.Errorf("record the queue's data format: %w", err)
			}
			return s.verifyFormat(ctx)
		}
		return &FormatError{Queue: s.keys.queue, Found: version, Known: FormatVersion}
	case err != nil:
		return fmt.Errorf("read the queue's data format: %w", err)
	}
	return s.formatOf(raw)
}

// verifyFormat reads back the recorded version after a SETNX.
func (s *Store) verifyFormat(ctx context.Context) error {
	raw, err := s.rdb.Get(ctx, s.keys.format()).Result()
	if err != nil {
		return fmt.Errorf("read the queue's data format: %w", err)
	}
	return s.formatOf(raw)
}

// formatOf checks a recorded version.
func (s *Store) formatOf(raw string) error {
	v, err := strconv.Atoi(raw)
	if err != nil || v < 1 || strconv.Itoa(v) != raw {
		return &FormatError{Queue: s.keys.queue, Known: FormatVersion, Raw: raw}
	}
	if v != FormatVersion {
		return &FormatError{Queue: s.keys.queue, Found: v, Known: FormatVersion}
	}
	return nil
}
