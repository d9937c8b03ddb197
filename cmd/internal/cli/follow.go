package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/cairnhq/cairn/workflow"
)

// Following a run's journal (events --follow).
const (
	// followReread is the longest events --follow goes without reading
	// the journal while the run's state stays the same: an event that
	// does not change the run (a signal kept for a later step) is shown
	// within it.
	followReread = 2 * time.Second
	// eventTypeWidth and eventStepWidth are the least widths of the TYPE
	// and STEP columns of events --follow, which prints rows as they come
	// and cannot measure the ones to come: the longest event type
	// (compensation_succeeded), and a common step name.
	eventTypeWidth = 22
	eventStepWidth = 12
)

// followEvents prints run id's journal, then its events as they are
// journaled, until the run ends or ctx is done (SIGINT or SIGTERM). It
// reads the run every poll interval, as --wait does, and the journal when
// the run's state has changed (or followReread has passed). Its outcome is
// --wait's: nil for a run that succeeded (a line on stderr says so), the
// run's failure for one that failed, was cancelled or compensated, and an
// interruption (exit 1) when ctx is done first. asJSON: each event is a
// line of JSON (JSON Lines), not a table row.
func (s *session) followEvents(ctx context.Context, id string, asJSON bool) error {
	f := &follower{w: s.stdout(), lay: s.cli.layout(), asJSON: asJSON}
	poll := time.NewTicker(s.cli.pollInterval())
	defer poll.Stop()
	var seen string
	var lastRead time.Time
	for {
		run, err := s.client.Get(ctx, id)
		if err != nil {
			if ctx.Err() != nil {
				return s.followInterrupted(ctx, id)
			}
			return err
		}
		if fp := fingerprint(run); fp != seen || s.cli.now().Sub(lastRead) >= followReread {
			evs, err := s.client.Events(ctx, id)
			if err != nil {
				if ctx.Err() != nil {
					return s.followInterrupted(ctx, id)
				}
				return err
			}
			if err := f.print(evs); err != nil {
				return err
			}
			seen, lastRead = fp, s.cli.now()
		}
		if run.Terminal() {
			if run.Status == workflow.StatusSucceeded {
				took := ""
				if run.FinishedAt != nil {
					took = " in " + fmtDuration(run.FinishedAt.Sub(run.CreatedAt))
				}
				fmt.Fprintf(s.stderr(), "run %s succeeded%s\n", run.ID, took)
			}
			return runResult(run)
		}
		select {
		case <-ctx.Done():
			return s.followInterrupted(ctx, id)
		case <-poll.C:
		}
	}
}

// followInterrupted is the error of an events --follow that ctx stopped:
// the run's state now, and that it goes on.
func (s *session) followInterrupted(ctx context.Context, id string) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pingTimeout)
	defer cancel()
	status := "still going"
	if run, err := s.client.Get(rctx, id); err == nil {
		status = string(run.Status)
	}
	return failuref("interrupted: stopped following run %s, which is %s (see: enqueue status %s)", id, status, id)
}

// follower prints the events of a journal it has not printed yet.
type follower struct {
	w      io.Writer
	lay    layout
	asJSON bool
	// last is the journal ID of the last event printed ("" for none).
	last string
	// headed: the table's header is printed.
	headed bool
}

// print prints the events of evs (a whole journal, oldest first) after
// the last one printed.
func (f *follower) print(evs []workflow.Event) error {
	var fresh []workflow.Event
	for _, ev := range evs {
		if f.last == "" || compareStreamIDs(ev.ID, f.last) > 0 {
			fresh = append(fresh, ev)
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	f.last = fresh[len(fresh)-1].ID
	if f.asJSON {
		enc := json.NewEncoder(f.w)
		enc.SetEscapeHTML(false)
		for _, ev := range fresh {
			if err := enc.Encode(ev); err != nil {
				return err
			}
		}
		return nil
	}
	t := newTable(f.lay)
	t.flex = 4
	t.minWidths = []int{0, eventTypeWidth, eventStepWidth, len("ATTEMPT")}
	if !f.headed {
		t.head = true
		t.add("TIME", "TYPE", "STEP", "ATTEMPT", "DETAILS")
		f.headed = true
	}
	for _, ev := range fresh {
		attempt := "-"
		if ev.Attempt > 0 {
			attempt = strconv.Itoa(ev.Attempt)
		}
		t.add(fmtTime(&ev.At), cell(ev.Type), cell(dash(ev.Step)), attempt, formatDetails(ev.Details))
	}
	return t.write(f.w)
}
