package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"go.opentelemetry.io/otel/propagation"

	"github.com/cairnhq/cairn/internal/regularfile"
	"github.com/cairnhq/cairn/workflow"
)

// maxInputBytes bounds a run's input; the CLI checks it before the client
// does, and passes it to the client.
const maxInputBytes = 1 << 20

// List page sizes.
const (
	defaultListLimit = 50
	maxListLimit     = 1000
)

// statuses are the run statuses list --status accepts.
var statuses = func() []string {
	out := make([]string, len(workflow.RunStatuses))
	for i, s := range workflow.RunStatuses {
		out[i] = string(s)
	}
	return out
}()

// parseStart parses "start <workflow> [--input JSON|@file]
// [--idempotency-key K] [--wait] [--json]".
func parseStart(c *CLI, fs *pflag.FlagSet) parseFunc {
	input := fs.String("input", "", "")
	key := fs.String("idempotency-key", "", "")
	ordKey := fs.String("ordering-key", "", "")
	shared := fs.Bool("shared-ordering", false, "")
	wait := fs.Bool("wait", false, "")
	asJSON := fs.Bool("json", false, "")
	return func(ctx context.Context, pos []string) (action, error) {
		name, err := positional("start", pos, "workflow name")
		if err != nil {
			return nil, err
		}
		raw := json.RawMessage("{}")
		if flagSet(fs, "input") {
			if raw, err = readInput(ctx, *input, c.Stdin); err != nil {
				return nil, err
			}
		}
		if flagSet(fs, "ordering-key") {
			if err := workflow.CheckOrderingKey(*ordKey); err != nil {
				return nil, usageErrorf("--ordering-key: %v", err)
			}
		}
		if *shared && *ordKey == "" {
			return nil, usageErrorf("start: --shared-ordering needs --ordering-key")
		}
		opts := &workflow.StartOptions{IdempotencyKey: *key, OrderingKey: *ordKey, Owner: CLIOwner, SharedOrdering: *shared}
		return func(ctx context.Context, s *session) error {
			// The caller's trace, from the environment (OpenTelemetry's
			// TRACEPARENT and TRACESTATE), if any.
			ctx = propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{
				"traceparent": c.getenv("TRACEPARENT"), "tracestate": c.getenv("TRACESTATE")})
			run, err := s.client.Start(ctx, name, raw, opts)
			if errors.Is(err, workflow.ErrUnknownWorkflow) {
				return s.unknownWorkflow(ctx, name)
			}
			if err != nil {
				return err
			}
			if run.Queued {
				return queuedStart(s, run, *asJSON, *wait)
			}
			if *wait {
				// Waiting may take long: let other commands use the outbox.
				s.closeOutbox()
			}
			if !*wait {
				if *asJSON {
					return writeJSON(s.stdout(), run)
				}
				_, err := fmt.Fprintln(s.stdout(), run.ID)
				return err
			}
			if !*asJSON {
				// The ID first, so that a caller has it while the run goes on.
				if _, err := fmt.Fprintln(s.stdout(), run.ID); err != nil {
					return err
				}
			}
			run, err = s.wait(ctx, run)
			if err != nil {
				return err
			}
			if *asJSON {
				if err := writeJSON(s.stdout(), run); err != nil {
					return err
				}
			}
			return runResult(run)
		}, nil
	}
}

// queuedStart reports a start queued in the outbox: "queued <run-id>" (or
// the run as JSON, with "queued": true). --wait cannot wait for a run that
// is not in Redis yet: an error after the ID.
func queuedStart(s *session, run *workflow.Run, asJSON, wait bool) error {
	var err error
	if asJSON {
		err = writeJSON(s.stdout(), run)
	} else {
		_, err = fmt.Fprintln(s.stdout(), "queued", run.ID)
	}
	if err != nil {
		return err
	}
	if wait {
		return failuref("run %s is queued in the outbox (CAIRN_OUTBOX) until Redis is reachable: cannot --wait for it; "+
			"the next enqueue command that reaches Redis sends it (see: enqueue outbox)", run.ID)
	}
	return nil
}

// flagSet reports whether the flag name was given.
func flagSet(fs *pflag.FlagSet, name string) bool { return fs.Changed(name) }

// readInput returns the run input that --input spec gives: JSON text,
// "@path" for a regular file's content or "@-" for stdin's. It checks that
// the input is one JSON value of at most maxInputBytes (whitespace
// included) that workflow.CheckJSON accepts (the byte offsets of its
// errors count from the start of the text or file), reading no more than one byte past the limit, and stops
// reading stdin when ctx is done (SIGINT or SIGTERM).
func readInput(ctx context.Context, spec string, stdin io.Reader) (json.RawMessage, error) {
	data, src := []byte(spec), "--input"
	if len(data) > maxInputBytes {
		return nil, usageErrorf("%s: input larger than %d bytes", src, maxInputBytes)
	}
	if path, ok := strings.CutPrefix(spec, "@"); ok {
		src = "--input " + spec
		var err error
		switch path {
		case "":
			return nil, usageErrorf("--input @: missing file name (use @path, or @- for stdin)")
		case "-":
			src = "--input @- (stdin)"
			data, err = regularfile.ReadBounded(ctx, stdin, maxInputBytes)
		default:
			data, err = regularfile.Read(ctx, path, maxInputBytes)
		}
		switch {
		case ctx.Err() != nil:
			return nil, failuref("interrupted while reading %s: no run was started", src)
		case errors.Is(err, regularfile.ErrTooLarge):
			return nil, usageErrorf("%s: input larger than %d bytes", src, maxInputBytes)
		case err != nil:
			return nil, usageErrorf("%s: %v", src, err)
		}
	}
	raw := data
	data = bytes.TrimSpace(data)
	switch {
	case len(data) == 0:
		return nil, usageErrorf("%s is empty: want a JSON value, such as {}", src)
	case !json.Valid(data):
		var v any
		err := json.Unmarshal(data, &v)
		if se, ok := errors.AsType[*json.SyntaxError](err); ok {
			return nil, usageErrorf("%s is not valid JSON: %v (at byte %d)", src, err, se.Offset)
		}
		return nil, usageErrorf("%s is not valid JSON: %v", src, err)
	}
	if err := workflow.CheckJSON(raw); err != nil { // what Start refuses, said with the flag
		return nil, usageErrorf("%s: %v", src, err)
	}
	return data, nil
}

// unknownWorkflow explains an unknown workflow name: the queue asked and
// the workflows its workers have published.
func (s *session) unknownWorkflow(ctx context.Context, name string) error {
	known := "none"
	if defs, err := s.client.Workflows(ctx); err == nil && len(defs) > 0 {
		names := make([]string, 0, len(defs))
		for n := range defs {
			names = append(names, n)
		}
		slices.Sort(names)
		known = strings.Join(names, ", ")
	}
	return usageErrorf("unknown workflow %q: no worker on queue %q has registered it (registered: %s)",
		name, s.cfg.Queue, known)
}

// runResult is the outcome of start --wait: nil for a run that succeeded.
// A compensated run is not a success: its compensations undid what its
// steps did, after a failure (or a cancel), which the error names.
func runResult(run *workflow.Run) error {
	switch run.Status {
	case workflow.StatusSucceeded:
		return nil
	case workflow.StatusFailed:
		return failuref("run %s failed: %s", run.ID, failureText(run))
	case workflow.StatusCompensated:
		return failuref("run %s compensated (its succeeded steps were undone) after: %s", run.ID, failureText(run))
	default:
		return failuref("run %s %s: %s", run.ID, run.Status, failureText(run))
	}
}

func failureText(run *workflow.Run) string {
	switch {
	case run.FailureReason != "" && run.FailureCode != "" && run.FailureCode != string(run.Status):
		return run.FailureReason + " [" + run.FailureCode + "]"
	case run.FailureReason != "":
		return run.FailureReason
	case run.FailureCode != "":
		return run.FailureCode
	}
	return "no reason recorded"
}

// parseStatus parses "status <run-id>|--last [--json]".
func parseStatus(_ *CLI, fs *pflag.FlagSet) parseFunc {
	last := addLastFlag(fs)
	asJSON := fs.Bool("json", false, "")
	return func(_ context.Context, pos []string) (action, error) {
		ref, err := runRefArg("status", pos, *last)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, s *session) error {
			id, err := s.resolve(ctx, ref)
			if err != nil {
				return err
			}
			run, err := s.client.Get(ctx, id)
			if err != nil {
				return err
			}
			if *asJSON {
				return writeJSON(s.stdout(), run)
			}
			if err := writeRun(s.stdout(), s.cli.layout(), run, s.cli.now()); err != nil {
				return err
			}
			return writeNoWorker(ctx, s.stdout(), s, run)
		}, nil
	}
}

// CLIOwner owns the runs the CLI starts (StartOptions.Owner).
const CLIOwner = "cli"

// parseKey parses "key <ordering-key> [--owner S | --shared] [--json]".
func parseKey(_ *CLI, fs *pflag.FlagSet) parseFunc {
	owner := fs.String("owner", "", "")
	shared := fs.Bool("shared", false, "")
	asJSON := fs.Bool("json", false, "")
	return func(_ context.Context, pos []string) (action, error) {
		key, err := positional("key", pos, "ordering key")
		if err != nil {
			return nil, err
		}
		if err := workflow.CheckOrderingKey(key); err != nil {
			return nil, usageErrorf("%v", err)
		}
		line := workflow.KeyLine{Key: key, Owner: CLIOwner, Shared: *shared}
		switch {
		case *shared && flagSet(fs, "owner"):
			return nil, usageErrorf("key: give --owner or --shared, not both")
		case flagSet(fs, "owner") && *owner == "":
			return nil, usageErrorf("key: --owner needs a subject (--shared for the shared line)")
		case flagSet(fs, "owner"):
			line.Owner = *owner
		}
		return func(ctx context.Context, s *session) error {
			line, err := s.client.OrderingKey(ctx, line, 0)
			if err != nil {
				return err
			}
			if *asJSON {
				return writeJSON(s.stdout(), line)
			}
			return writeKeyRuns(s.stdout(), s.cli.layout(), line)
		}, nil
	}
}

// parseList parses "list [--status S] [--paused] [--limit N] [--cursor C]
// [--id-prefix P] [--input COND]... [--since T] [--until T] [--max-scan N]
// [--json]".
func parseList(c *CLI, fs *pflag.FlagSet) parseFunc {
	status := fs.String("status", "", "")
	limit := fs.Int("limit", defaultListLimit, "")
	cursor := fs.String("cursor", "", "")
	idPrefix := fs.String("id-prefix", "", "")
	input := fs.StringArray("input", nil, "")
	since := fs.String("since", "", "")
	until := fs.String("until", "", "")
	maxScan := fs.Int("max-scan", 0, "")
	paused := fs.Bool("paused", false, "")
	asJSON := fs.Bool("json", false, "")
	return func(_ context.Context, pos []string) (action, error) {
		if err := noPositional("list", pos); err != nil {
			return nil, err
		}
		if *status != "" && !slices.Contains(statuses, *status) {
			return nil, usageErrorf("list: invalid --status %q: want %s", *status, strings.Join(statuses, ", "))
		}
		if *limit < 1 || *limit > maxListLimit {
			return nil, usageErrorf("list: invalid --limit %d: want 1 to %d", *limit, maxListLimit)
		}
		if *cursor != "" && !validCursor(*cursor) {
			return nil, badCursor(*cursor)
		}
		opts := workflow.ListOptions{Status: workflow.RunStatus(*status), Limit: *limit, Cursor: *cursor, Paused: *paused}
		if err := searchFlags(c, fs, &opts, *idPrefix, *input, *since, *until, *maxScan); err != nil {
			return nil, err
		}
		return func(ctx context.Context, s *session) error {
			page, err := s.client.ListPage(ctx, opts)
			if errors.Is(err, workflow.ErrInvalidCursor) {
				return badCursor(*cursor)
			}
			if errors.Is(err, workflow.ErrInvalidSearch) {
				return usageErrorf("list: %v", err)
			}
			if err != nil {
				return err
			}
			runs := page.Runs
			if runs == nil {
				runs = []*workflow.Run{}
			}
			if *asJSON {
				err = writeJSON(s.stdout(), runs)
			} else {
				err = writeRunList(s.stdout(), s.cli.layout(), runs)
			}
			switch {
			case err != nil:
			case page.Limited:
				fmt.Fprintf(s.stderr(), "search stopped after examining %d runs (--max-scan); older runs not searched yet: add --cursor %s\n",
					page.Scanned, page.Next)
			case page.Next != "":
				fmt.Fprintf(s.stderr(), "more runs: add --cursor %s\n", page.Next)
			}
			return err
		}, nil
	}
}

// searchFlags checks list's search flags and sets them in opts: a bad one
// is a usage error (exit 2) that names the flag and the position in it.
func searchFlags(c *CLI, fs *pflag.FlagSet, opts *workflow.ListOptions, idPrefix string, input []string,
	since, until string, maxScan int) error {
	bad := func(flag string, err error) error {
		if se, ok := errors.AsType[*workflow.SearchError](err); ok {
			if se.Pos > 0 {
				return usageErrorf("list: invalid --%s: position %d: %s", flag, se.Pos, se.Msg)
			}
			return usageErrorf("list: invalid --%s: %s", flag, se.Msg)
		}
		return usageErrorf("list: invalid --%s: %v", flag, err)
	}
	if flagSet(fs, "id-prefix") {
		p, err := workflow.ParseIDPrefix(idPrefix)
		if err != nil {
			return bad("id-prefix", err)
		}
		opts.IDPrefix = p
	}
	if len(input) > 0 {
		for _, in := range input { // each on its own, so that a position is in the flag given
			if _, err := workflow.ParseInputFilter(in); err != nil {
				return bad("input", err)
			}
		}
		f, err := workflow.ParseInputFilter(strings.Join(input, " "))
		if err != nil {
			return bad("input", err)
		}
		opts.Input = f
	}
	now := c.now()
	if flagSet(fs, "since") {
		t, err := workflow.ParseTimeBound("since", since, now)
		if err != nil {
			return bad("since", err)
		}
		opts.CreatedFrom = t
	}
	if flagSet(fs, "until") {
		t, err := workflow.ParseTimeBound("until", until, now)
		if err != nil {
			return bad("until", err)
		}
		opts.CreatedTo = t
	}
	if !opts.CreatedFrom.IsZero() && !opts.CreatedTo.IsZero() && !opts.CreatedTo.After(opts.CreatedFrom) {
		return usageErrorf("list: --until (%s) is not after --since (%s)", opts.CreatedTo.UTC().Format(time.RFC3339Nano),
			opts.CreatedFrom.UTC().Format(time.RFC3339Nano))
	}
	if flagSet(fs, "max-scan") {
		if maxScan < 1 || maxScan > workflow.MaxSearchScan {
			return usageErrorf("list: invalid --max-scan %d: want 1 to %d", maxScan, workflow.MaxSearchScan)
		}
		opts.MaxScan = maxScan
	}
	return nil
}

// validCursor reports whether c has the form of the cursors list prints,
// "<created ms>:<run ID>", or, after a page a search's bound ended,
// "<created ms>:<the start of a run ID>", which the workflow client
// (retrystate's ListRuns) takes; List's ErrInvalidCursor backs this check
// up.
func validCursor(c string) bool {
	ms, id, ok := strings.Cut(c, ":")
	if _, err := strconv.ParseInt(ms, 10, 64); err != nil || !ok {
		return false
	}
	return workflow.ValidRunIDPrefix(id)
}

func badCursor(c string) error {
	return usageErrorf("list: %v %q: pass the cursor a previous list printed after \"more runs: add --cursor\"",
		workflow.ErrInvalidCursor, c)
}

// parseEvents parses "events <run-id>|--last [--follow] [--json]".
func parseEvents(_ *CLI, fs *pflag.FlagSet) parseFunc {
	last := addLastFlag(fs)
	follow := fs.Bool("follow", false, "")
	asJSON := fs.Bool("json", false, "")
	return func(_ context.Context, pos []string) (action, error) {
		ref, err := runRefArg("events", pos, *last)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, s *session) error {
			id, err := s.resolve(ctx, ref)
			if err != nil {
				return err
			}
			if *follow {
				return s.followEvents(ctx, id, *asJSON)
			}
			evs, err := s.client.Events(ctx, id)
			if err != nil {
				return err
			}
			if evs == nil {
				evs = []workflow.Event{}
			}
			if *asJSON {
				return writeJSON(s.stdout(), evs)
			}
			return writeEvents(s.stdout(), s.cli.layout(), evs)
		}, nil
	}
}

// parseCancel parses "cancel <run-id>|--last [--compensate] [--json]".
func parseCancel(_ *CLI, fs *pflag.FlagSet) parseFunc {
	compensate := fs.Bool("compensate", false, "")
	last := addLastFlag(fs)
	asJSON := fs.Bool("json", false, "")
	return func(_ context.Context, pos []string) (action, error) {
		ref, err := runRefArg("cancel", pos, *last)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, s *session) error {
			id, err := s.resolve(ctx, ref)
			if err != nil {
				return err
			}
			run, err := s.client.Cancel(ctx, id, &workflow.ActionOptions{Actor: "cli", Compensate: *compensate})
			if errors.Is(err, workflow.ErrRunFinished) {
				status := "finished"
				if r, gerr := s.client.Get(ctx, id); gerr == nil {
					status = string(r.Status)
				}
				return failuref("run %s already finished (%s): there is nothing to cancel", id, status)
			}
			if errors.Is(err, workflow.ErrActionRefused) {
				return failuref("cancel refused: %s", strings.TrimPrefix(err.Error(), workflow.ErrActionRefused.Error()+": "))
			}
			if err != nil {
				return err
			}
			if *asJSON {
				return writeJSON(s.stdout(), run)
			}
			_, err = fmt.Fprintln(s.stdout(), cancelLine(run, *compensate))
			return err
		}, nil
	}
}

// cancelLine is what cancel prints: the run, and with --compensate where
// its compensations stand.
func cancelLine(run *workflow.Run, compensate bool) string {
	if !compensate {
		return "cancelled " + run.ID
	}
	if run.Status == workflow.StatusCompensating {
		return fmt.Sprintf("cancelled %s: compensating (its succeeded steps are undone, last first; see: enqueue status %s)",
			run.ID, run.ID)
	}
	if run.Status == workflow.StatusCancelled {
		return fmt.Sprintf("cancelled %s (nothing to compensate)", run.ID)
	}
	return fmt.Sprintf("cancelled %s: %s", run.ID, run.Status)
}

// parseOperator parses "recover <run-id>", "retry <run-id> --step NAME
// [--now]" and "skip <run-id> --step NAME" (--last for the run ID, and
// --wait, --json). retry --now makes the step's scheduled retry due now
// (workflow.Client.RetryNow) rather than start a failed step afresh.
// An action the run's state does not allow is refused with exit code 1 and
// the reason; nothing changes. With --wait it then waits for the run to
// end, as start --wait does, showing the journal from the action on.
func parseOperator(name string) func(*CLI, *pflag.FlagSet) parseFunc {
	return func(_ *CLI, fs *pflag.FlagSet) parseFunc {
		step := fs.String("step", "", "")
		last := addLastFlag(fs)
		wait := fs.Bool("wait", false, "")
		asJSON := fs.Bool("json", false, "")
		now := new(bool)
		if name == "retry" {
			now = fs.Bool("now", false, "")
		}
		return func(_ context.Context, pos []string) (action, error) {
			ref, err := runRefArg(name, pos, *last)
			if err != nil {
				return nil, err
			}
			if name != "recover" && *step == "" {
				return nil, usageErrorf("%s needs --step NAME", name)
			}
			if name == "recover" && *step != "" {
				return nil, usageErrorf("recover takes no --step: it resumes at the step the run stopped at (use retry --step)")
			}
			return func(ctx context.Context, s *session) error {
				id, err := s.resolve(ctx, ref)
				if err != nil {
					return err
				}
				// With --wait, the progress shown starts after the journal's
				// last event before the action.
				after := ""
				if *wait {
					evs, err := s.client.Events(ctx, id)
					if err != nil {
						return err
					}
					if len(evs) > 0 {
						after = evs[len(evs)-1].ID
					}
				}
				opts := &workflow.ActionOptions{Actor: "cli"}
				var run *workflow.Run
				switch name {
				case "recover":
					run, err = s.client.Recover(ctx, id, opts)
				case "retry":
					if *now {
						run, err = s.client.RetryNow(ctx, id, *step, opts)
						break
					}
					run, err = s.client.RetryStep(ctx, id, *step, opts)
				default:
					run, err = s.client.SkipStep(ctx, id, *step, opts)
				}
				if errors.Is(err, workflow.ErrActionRefused) {
					what := name
					if *now {
						what = "retry --now"
					}
					return failuref("%s refused: %s", what, strings.TrimPrefix(err.Error(), workflow.ErrActionRefused.Error()+": "))
				}
				if err != nil {
					return err
				}
				if *asJSON && !*wait {
					return writeJSON(s.stdout(), run)
				}
				if !*asJSON {
					done := pastTense(name)
					if *now {
						done = "retrying now"
					}
					if _, err := fmt.Fprintf(s.stdout(), "%s %s: %s, at step %s\n", done, run.ID, run.Status,
						run.CurrentStep); err != nil {
						return err
					}
				}
				if !*wait {
					return nil
				}
				// Waiting may take long: let other commands use the outbox.
				s.closeOutbox()
				run, err = s.waitFrom(ctx, run, after)
				if err != nil {
					return err
				}
				if *asJSON {
					if err := writeJSON(s.stdout(), run); err != nil {
						return err
					}
				}
				return runResult(run)
			}, nil
		}
	}
}

func pastTense(action string) string {
	switch action {
	case "recover":
		return "recovered"
	case "retry":
		return "retrying"
	}
	return "skipped step of"
}
