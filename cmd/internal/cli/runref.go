package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/cairnhq/cairn/workflow"
)

// Run-ID prefixes.
const (
	// minRunIDPrefix is the shortest prefix of a run ID taken for one: the
	// first characters of every ID are the same for years (they are its
	// creation time), and a 1-character prefix that happens to match one
	// run should not cancel it.
	minRunIDPrefix = 4
	// ambiguousShown is how many of the runs an ambiguous prefix matches
	// its error lists.
	ambiguousShown = 5
)

// errAmbiguousRunID is the error of a prefix that matches several runs.
var errAmbiguousRunID = errors.New("ambiguous run ID prefix")

// runRef is the run a command names: a whole run ID, a prefix of one, or
// the newest run (--last). It is checked when parsed and resolved to a run
// ID once connected (session.resolve).
type runRef struct {
	// arg is the run ID or prefix given ("" with last).
	arg  string
	last bool
}

// whole reports whether the reference is a whole run ID.
func (r runRef) whole() bool { return !r.last && workflow.ValidRunID(r.arg) }

// addLastFlag registers --last on fs.
func addLastFlag(fs *pflag.FlagSet) *bool { return fs.Bool("last", false, "") }

// takeRunRef takes the run a command names from its positional arguments
// (the first, unless --last names the run) and returns the rest. A run ID
// must be whole, or a prefix of at least minRunIDPrefix characters of one.
func takeRunRef(cmd string, pos []string, last bool) (runRef, []string, error) {
	if last {
		return runRef{last: true}, pos, nil
	}
	if len(pos) == 0 {
		return runRef{}, nil, usageErrorf("%s: missing run ID, or --last (usage: enqueue %s)", cmd, lookup(cmd).synopsis)
	}
	id := pos[0]
	if !workflow.ValidRunID(id) && (len(id) < minRunIDPrefix || !workflow.ValidRunIDPrefix(id)) {
		return runRef{}, nil, usageErrorf("%v %q: want the 26-character ID that start printed, a prefix of it "+
			"(%d characters or more), or --last", workflow.ErrInvalidRunID, id, minRunIDPrefix)
	}
	return runRef{arg: id}, pos[1:], nil
}

// runRefArg parses the run a command names as its only argument (or
// --last).
func runRefArg(cmd string, pos []string, last bool) (runRef, error) {
	ref, rest, err := takeRunRef(cmd, pos, last)
	if err != nil {
		return runRef{}, err
	}
	if len(rest) > 0 {
		if last {
			return runRef{}, usageErrorf("%s: unexpected argument %q: --last names the run (usage: enqueue %s)",
				cmd, rest[0], lookup(cmd).synopsis)
		}
		return runRef{}, usageErrorf("%s: unexpected argument %q (usage: enqueue %s)", cmd, rest[0], lookup(cmd).synopsis)
	}
	return ref, nil
}

// resolve returns the run ID that ref names: a whole ID as it is (the
// command tells whether the run exists), the one run whose ID starts with a
// prefix, or the newest run. Prefixes and --last look among every run of
// the queue, whoever started it, as list does: the CLI holds the Redis
// credentials, the same access as the dashboard's admin.
func (s *session) resolve(ctx context.Context, ref runRef) (string, error) {
	if ref.whole() {
		return ref.arg, nil
	}
	if ref.last {
		return s.lastRun(ctx)
	}
	runs, err := s.client.FindRuns(ctx, ref.arg, workflow.FindRunsOptions{Limit: ambiguousShown + 1})
	if err != nil {
		return "", s.resolveFailed(ref, err)
	}
	switch len(runs) {
	case 0:
		return "", fmt.Errorf("%w: no run ID on queue %q starts with %q", workflow.ErrRunNotFound, s.cfg.Queue, ref.arg)
	case 1:
		return runs[0].ID, nil
	}
	shown := make([]string, 0, ambiguousShown)
	for _, r := range runs[:min(len(runs), ambiguousShown)] {
		shown = append(shown, fmt.Sprintf("%s (%s, %s, created %s)", r.ID, r.Workflow, r.Status, fmtTime(&r.CreatedAt)))
	}
	more := ""
	if len(runs) > ambiguousShown {
		more = " and more"
	}
	return "", fmt.Errorf("%w %q: it matches %s%s; give more of the ID", errAmbiguousRunID, ref.arg,
		strings.Join(shown, ", "), more)
}

// lastRun returns the ID of the newest run of the queue.
func (s *session) lastRun(ctx context.Context) (string, error) {
	cursor := ""
	for {
		// A page may hold no run when its runs expired since the index
		// was last trimmed: go on to the next.
		runs, next, err := s.client.List(ctx, workflow.ListOptions{Limit: 10, Cursor: cursor})
		if err != nil {
			return "", s.resolveFailed(runRef{last: true}, err)
		}
		if len(runs) > 0 {
			return runs[0].ID, nil
		}
		if next == "" {
			return "", fmt.Errorf("%w: --last: queue %q has no run", workflow.ErrRunNotFound, s.cfg.Queue)
		}
		cursor = next
	}
}

// resolveFailed explains an error of a prefix's or --last's lookup: an
// outbox (start and signal with CAIRN_OUTBOX) queues only what names a
// whole run ID.
func (s *session) resolveFailed(ref runRef, err error) error {
	what := "--last"
	if !ref.last {
		what = fmt.Sprintf("run ID prefix %q", ref.arg)
	}
	if s.cfg.Outbox != "" {
		return failuref("cannot resolve %s without Redis at %s: %v (give the whole run ID to queue in the outbox)",
			what, s.addr, err)
	}
	return failuref("cannot resolve %s: %v", what, err)
}
