package cli

import (
	"github.com/spf13/pflag"

	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/cairnhq/cairn/workflow"
)

// The outbox (CAIRN_OUTBOX).
const (
	// outboxFlushTimeout bounds the flush every command that reaches Redis
	// begins with.
	outboxFlushTimeout = 10 * time.Second
	// outboxLockTimeout bounds the wait for another enqueue that has the
	// outbox open (it holds it while it flushes, at most
	// outboxFlushTimeout, and while it runs its command; start --wait
	// closes it before it waits).
	outboxLockTimeout = 15 * time.Second
)

// openOutbox gives the session a client with the outbox CAIRN_OUTBOX names
// and flushes it, reporting on stderr what the flush did; a flush that
// cannot finish is a warning, not an error: the command goes on. mustOpen:
// the command needs the outbox (start and signal queue there), so failing
// to open it is an error; otherwise a warning, and the command goes on
// without it.
func (s *session) openOutbox(ctx context.Context, mustOpen bool) error {
	client, err := workflow.OpenClient(s.rdb, s.clientConfig(s.cfg.Outbox))
	if err != nil {
		if mustOpen {
			return failuref("cannot open the outbox (CAIRN_OUTBOX): %v", err)
		}
		fmt.Fprintf(s.stderr(), "outbox: not sent: cannot open CAIRN_OUTBOX: %s\n", oneLine(err.Error()))
		return nil
	}
	s.client = client
	fctx, cancel := context.WithTimeout(ctx, outboxFlushTimeout)
	defer cancel()
	rep, err := client.FlushOutbox(fctx)
	// The client's background flusher starts at once and may have sent
	// entries before this flush ran: report what the client sent in all
	// (the flushes take turns, so the background one has ended by now).
	if st, serr := client.OutboxStats(); serr == nil {
		rep.Flushed, rep.DeadLettered = clampInt(st.Flushed), clampInt(st.DeadLettered)
	}
	if rep.Flushed > 0 {
		fmt.Fprintf(s.stderr(), "outbox: sent %d queued %s\n", rep.Flushed, word(rep.Flushed, "entry", "entries"))
	}
	if rep.DeadLettered > 0 {
		fmt.Fprintf(s.stderr(), "outbox: %d queued %s refused by Redis, kept as dead letters (see: enqueue outbox)\n",
			rep.DeadLettered, word(rep.DeadLettered, "entry was", "entries were"))
	}
	if err != nil && ctx.Err() == nil {
		fmt.Fprintf(s.stderr(), "outbox: %d %s still queued: %s\n", rep.Remaining,
			word(rep.Remaining, "entry", "entries"), oneLine(err.Error()))
	}
	return nil
}

// closeOutbox closes the outbox, so that other enqueue commands can open
// it while this one goes on (start --wait).
func (s *session) closeOutbox() {
	if err := s.client.Close(); err != nil {
		fmt.Fprintf(s.stderr(), "outbox: closing CAIRN_OUTBOX: %s\n", oneLine(err.Error()))
	}
}

// word returns one for n = 1, else many.
// clampInt is n as an int (a count of this process's flushes: far below
// the bound, which only a corrupt count could reach).
func clampInt(n uint64) int {
	if n > math.MaxInt {
		return math.MaxInt
	}
	return int(n)
}

func word(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// parseOutbox parses "outbox [--json] [--requeue-dead] [--drop-dead]".
func parseOutbox(_ *CLI, fs *pflag.FlagSet) parseFunc {
	asJSON := fs.Bool("json", false, "")
	requeue := fs.Bool("requeue-dead", false, "")
	drop := fs.Bool("drop-dead", false, "")
	return func(_ context.Context, pos []string) (action, error) {
		if err := noPositional("outbox", pos); err != nil {
			return nil, err
		}
		if *requeue && *drop {
			return nil, usageErrorf("outbox: --requeue-dead and --drop-dead exclude each other")
		}
		return func(ctx context.Context, s *session) error {
			if s.cfg.Outbox == "" {
				return usageErrorf("outbox: CAIRN_OUTBOX is not set: there is no outbox")
			}
			if *requeue || *drop {
				if err := s.changeDeadLetters(ctx, *requeue); err != nil {
					return err
				}
			}
			contents, err := workflow.ReadOutbox(s.cfg.Outbox, s.cli.outboxLockTimeout())
			if err != nil {
				return failuref("cannot read the outbox (CAIRN_OUTBOX): %v", err)
			}
			if *asJSON {
				return writeJSON(s.stdout(), contents)
			}
			return writeOutbox(s.stdout(), s.cli.layout(), contents)
		}, nil
	}
}

// changeDeadLetters requeues or drops the dead letters. It opens the outbox
// with a client of CAIRN_REDIS_URL, whose flusher sends the requeued entries
// at once if Redis answers.
func (s *session) changeDeadLetters(ctx context.Context, requeue bool) error {
	rdb, _, err := s.cli.newRedis(s.cfg)
	if err != nil {
		return err
	}
	s.rdb = rdb
	defer s.close()
	if err := s.openOutbox(ctx, true); err != nil {
		return err
	}
	if !requeue {
		n, err := s.client.DropOutboxDeadLetters()
		if err != nil {
			return failuref("outbox: %v", err)
		}
		fmt.Fprintf(s.stderr(), "outbox: dropped %d dead %s\n", n, word(n, "letter", "letters"))
		return nil
	}
	n, err := s.client.RequeueOutboxDeadLetters()
	fmt.Fprintf(s.stderr(), "outbox: requeued %d dead %s\n", n, word(n, "letter", "letters"))
	if err != nil {
		return failuref("outbox: %v", err)
	}
	fctx, cancel := context.WithTimeout(ctx, outboxFlushTimeout)
	defer cancel()
	rep, err := s.client.FlushOutbox(fctx)
	if rep.Flushed > 0 || rep.DeadLettered > 0 {
		fmt.Fprintf(s.stderr(), "outbox: sent %d, %d refused again\n", rep.Flushed, rep.DeadLettered)
	}
	if err != nil && ctx.Err() == nil {
		fmt.Fprintf(s.stderr(), "outbox: %d still queued: %s\n", rep.Remaining, oneLine(err.Error()))
	}
	return nil
}

// writeOutbox writes the queued entries and the dead letters as tables.
func writeOutbox(w io.Writer, lay layout, c *workflow.OutboxContents) error {
	if len(c.Queued) == 0 {
		fmt.Fprintln(w, "nothing queued")
	} else {
		fmt.Fprintf(w, "%d queued (sent in this order when Redis is reachable):\n", len(c.Queued))
		t := newTable(lay)
		t.head, t.flex, t.flexMax = true, 7, 60
		t.add("SEQ", "KIND", "RUN ID", "WORKFLOW/SIGNAL", "KEY", "QUEUED AT", "ATTEMPTS", "LAST ERROR")
		for i := range c.Queued {
			e := &c.Queued[i]
			t.add(strconv.FormatUint(e.Seq, 10), cell(string(e.Kind)), e.RunID, cell(outboxWhat(e)),
				cell(dash(outboxKey(e))), fmtTime(&e.QueuedAt), strconv.Itoa(e.Attempts), cell(dash(e.LastError)))
		}
		if err := t.write(w); err != nil {
			return err
		}
	}
	if len(c.Dead) == 0 {
		_, err := fmt.Fprintln(w, "no dead letters")
		return err
	}
	fmt.Fprintf(w, "%d dead %s (refused by Redis; enqueue outbox --requeue-dead queues them again):\n", len(c.Dead),
		word(len(c.Dead), "letter", "letters"))
	t := newTable(lay)
	t.head, t.flex, t.flexMax = true, 7, 80
	t.add("SEQ", "KIND", "RUN ID", "WORKFLOW/SIGNAL", "KEY", "QUEUED AT", "DEAD AT", "REASON")
	for i := range c.Dead {
		e := &c.Dead[i]
		t.add(strconv.FormatUint(e.Seq, 10), cell(string(e.Kind)), dash(e.RunID), cell(dash(outboxWhat(e))),
			cell(dash(outboxKey(e))), fmtTime(&e.QueuedAt), fmtTime(e.DeadAt), cell(e.DeadReason))
	}
	return t.write(w)
}

// outboxWhat is an entry's workflow (a start) or signal name.
func outboxWhat(e *workflow.OutboxEntry) string {
	if e.Kind == workflow.OutboxSignal {
		return e.Signal
	}
	return e.Workflow
}

// outboxKey is a start's ordering key, or a signal's ID.
func outboxKey(e *workflow.OutboxEntry) string {
	if e.Kind == workflow.OutboxSignal {
		return "id " + e.SignalID
	}
	return e.OrderingKey
}
