package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/cairnhq/cairn/workflow"
)

// parseWorkers parses "workers [--json]".
func parseWorkers(_ *CLI, fs *pflag.FlagSet) parseFunc {
	asJSON := fs.Bool("json", false, "")
	return func(_ context.Context, pos []string) (action, error) {
		if err := noPositional("workers", pos); err != nil {
			return nil, err
		}
		return func(ctx context.Context, s *session) error {
			ws, more, err := s.client.Workers(ctx)
			if err != nil {
				return err
			}
			if *asJSON {
				if ws == nil {
					ws = []workflow.WorkerInfo{}
				}
				return writeJSON(s.stdout(), ws)
			}
			if len(ws) == 0 {
				_, err := fmt.Fprintln(s.stdout(), noWorkerLine(s.client.Queue(), "its runs wait, pending,"))
				return err
			}
			t := newTable(s.cli.layout())
			t.head = true
			t.add("WORKER", "KIND", "HOST", "PID", "QUEUES", "IN FLIGHT", "STARTED", "VERSION", "LAST HEARTBEAT")
			for _, w := range ws {
				kind := w.Kind
				if kind == workflow.WorkerKindAsynq {
					kind = "asynq server"
				}
				beat := "-"
				if w.LastHeartbeat != nil {
					beat = fmtTime(w.LastHeartbeat)
				}
				t.add(cell(w.ID), kind, cell(w.Host), strconv.Itoa(w.PID), cell(strings.Join(w.Queues, ",")),
					fmt.Sprintf("%d/%d", w.InFlight, w.Concurrency), fmtTime(&w.StartedAt), cell(dash(w.Version)), beat)
			}
			if err := t.write(s.stdout()); err != nil {
				return err
			}
			if more {
				_, err = fmt.Fprintf(s.stdout(), "(more than %d live workers of a kind; the first listed)\n", workflow.MaxWorkers)
			}
			return err
		}, nil
	}
}

// noWorkerLine says that no live worker serves queue, and that what
// (the run, its runs) waits until one starts.
func noWorkerLine(queue, what string) string {
	return fmt.Sprintf("no live worker serves queue %s: %s until one starts", strconv.Quote(queue), what)
}

// writeNoWorker writes, after a run's status, the line that says no live
// worker serves its queue when the run waits for one; nothing when it
// does not, or when that cannot be read (the status is shown anyway).
func writeNoWorker(ctx context.Context, w io.Writer, s *session, run *workflow.Run) error {
	if !run.WaitsForWorker() || run.Queued {
		return nil
	}
	served, err := s.client.Served(ctx)
	if err != nil || served {
		return nil //nolint:nilerr // the status was read; this line is an extra
	}
	_, err = fmt.Fprintln(w, "\n"+noWorkerLine(s.client.Queue(), "this run waits"))
	return err
}
