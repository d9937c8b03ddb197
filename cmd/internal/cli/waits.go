package cli

import (
	"github.com/spf13/pflag"

	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cairnhq/cairn/internal/regularfile"
	"github.com/cairnhq/cairn/workflow"
)

// parseSignal parses "signal <run-id> <name> [--payload JSON|@file] [--id
// ID] [--json]", or "signal --last <name> ...".
func parseSignal(c *CLI, fs *pflag.FlagSet) parseFunc {
	payload := fs.String("payload", "", "")
	id := fs.String("id", "", "")
	last := addLastFlag(fs)
	asJSON := fs.Bool("json", false, "")
	return func(ctx context.Context, pos []string) (action, error) {
		want := 2
		if *last {
			want = 1
		}
		if len(pos) != want {
			return nil, usageErrorf("signal: want a run ID and a signal name, or --last and a signal name (usage: enqueue signal <run-id> <name> [flags])")
		}
		ref, rest, err := takeRunRef("signal", pos, *last)
		if err != nil {
			return nil, err
		}
		name := rest[0]
		if len(*id) > workflow.MaxSignalID {
			return nil, usageErrorf("signal: --id longer than %d bytes", workflow.MaxSignalID)
		}
		raw := json.RawMessage("null")
		if flagSet(fs, "payload") {
			if raw, err = readJSONFlag(ctx, "--payload", *payload, c.Stdin, workflow.MaxSignalPayload); err != nil {
				return nil, err
			}
		}
		return func(ctx context.Context, s *session) error {
			runID, err := s.resolve(ctx, ref)
			if err != nil {
				return err
			}
			res, err := s.client.Signal(ctx, runID, name, raw, &workflow.SignalOptions{ID: *id, Actor: "cli"})
			switch {
			case errors.Is(err, workflow.ErrRunFinished):
				return failuref("signal refused: %v", err)
			case errors.Is(err, workflow.ErrActionRefused):
				return failuref("signal refused: %s", strings.TrimPrefix(err.Error(), workflow.ErrActionRefused.Error()+": "))
			case errors.Is(err, workflow.ErrMailboxFull):
				return failuref("signal refused: %v", err)
			case err != nil:
				return err
			}
			if *asJSON {
				return writeJSON(s.stdout(), res)
			}
			var line string
			switch res.Outcome {
			case workflow.SignalDelivered:
				line = fmt.Sprintf("delivered %s to %s: step %s done", name, runID, res.Step)
				if res.RunSucceeded {
					line += "; run succeeded"
				}
			case workflow.SignalQueued:
				line = fmt.Sprintf("kept %s for %s: its await has not been reached (%d pending)", name, runID, res.Pending)
			case workflow.SignalOutbox:
				line = fmt.Sprintf("queued signal %s for %s in the outbox (id %s): sent when Redis is reachable", name, runID, res.ID)
			default:
				line = fmt.Sprintf("signal %s with id %q was received before: nothing done", name, *id)
			}
			_, err = fmt.Fprintln(s.stdout(), line)
			return err
		}, nil
	}
}

// readJSONFlag returns the JSON value a flag gives: JSON text, "@path" for a
// regular file's content or "@-" for stdin's, at most limit bytes, that
// workflow.CheckJSON accepts; empty is null.
func readJSONFlag(ctx context.Context, flagName, spec string, stdin io.Reader, limit int) (json.RawMessage, error) {
	data, src := []byte(spec), flagName
	if path, ok := strings.CutPrefix(spec, "@"); ok {
		src = flagName + " " + spec
		var err error
		switch path {
		case "":
			return nil, usageErrorf("%s @: missing file name (use @path, or @- for stdin)", flagName)
		case "-":
			data, err = regularfile.ReadBounded(ctx, stdin, int64(limit))
		default:
			data, err = regularfile.Read(ctx, path, int64(limit))
		}
		switch {
		case ctx.Err() != nil:
			return nil, failuref("interrupted while reading %s: nothing was sent", src)
		case errors.Is(err, regularfile.ErrTooLarge):
			return nil, usageErrorf("%s: larger than %d bytes", src, limit)
		case err != nil:
			return nil, usageErrorf("%s: %v", src, err)
		}
	}
	raw := data
	data = bytes.TrimSpace(data)
	switch {
	case len(data) > limit:
		return nil, usageErrorf("%s: larger than %d bytes", src, limit)
	case len(data) == 0:
		return json.RawMessage("null"), nil
	case !json.Valid(data):
		var v any
		return nil, usageErrorf("%s is not valid JSON: %v", src, json.Unmarshal(data, &v))
	}
	if err := workflow.CheckJSON(raw); err != nil { // what Signal refuses, said with the flag
		return nil, usageErrorf("%s: %v", src, err)
	}
	return data, nil
}

// waitCountdown is start --wait's countdown line while the run's current
// step waits for a signal or sleeps; "" otherwise.
func waitCountdown(run *workflow.Run, now time.Time) string {
	st := run.Step(run.CurrentStep)
	if st == nil || st.Status != workflow.StepWaiting || st.WaitingFor == nil || st.WaitingFor.Until == nil {
		return ""
	}
	left := inDuration(st.WaitingFor.Until.Sub(now))
	if st.WaitingFor.Signal != "" {
		return fmt.Sprintf("%s: waiting for signal %s; times out %s", cell(st.Name), cell(st.WaitingFor.Signal), left)
	}
	return fmt.Sprintf("%s: sleeping; wakes %s", cell(st.Name), left)
}

// waitProgressLine describes a journal event of an await or a sleep for
// start --wait; ok is false for other events.
func waitProgressLine(ev workflow.Event) (line string, ok bool) {
	d := ev.Details
	switch ev.Type {
	case workflow.EventAwaitStarted:
		return fmt.Sprintf("%s: waiting for signal %s until %s", ev.Step, cell(d["signal"]), dash(d["until"])), true
	case workflow.EventSignalReceived:
		if ev.Step == "" {
			return fmt.Sprintf("signal %s received; kept for a later step", cell(d["signal"])), true
		}
		return fmt.Sprintf("%s: signal %s received", ev.Step, cell(d["signal"])), true
	case workflow.EventSignalConsumed:
		return fmt.Sprintf("%s: signal %s (received earlier) taken", ev.Step, cell(d["signal"])), true
	case workflow.EventAwaitTimedOut:
		return fmt.Sprintf("%s: no signal %s before %s", ev.Step, cell(d["signal"]), dash(d["until"])), true
	case workflow.EventTimerSet:
		return fmt.Sprintf("%s: sleeping until %s", ev.Step, dash(d["until"])), true
	case workflow.EventTimerFired:
		return fmt.Sprintf("%s: woke up", ev.Step), true
	}
	return "", false
}
