package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/cairnhq/cairn/workflow"

	"github.com/spf13/pflag"
)

// command is one subcommand of enqueue.
type command struct {
	name string
	// synopsis is the command line, e.g. "start <workflow> [flags]".
	synopsis string
	// summary is a one-line description.
	summary string
	// flags documents the flags, one "name\tdescription" per line.
	flags []string
	// parse registers the command's flags on fs and returns the function
	// that, once fs has parsed the command line (flags may come before or
	// after the positional arguments), checks the arguments and returns
	// the action to run once connected. That function reads the run input
	// (start --input @-), and stops when ctx is done.
	parse func(c *CLI, fs *pflag.FlagSet) parseFunc
	// offline: the action needs no Redis (its session has only the
	// configuration).
	offline bool
	// standalone: the action needs neither Redis nor the configuration
	// (completion): a bad CAIRN_* variable does not stop it.
	standalone bool
	// queues: with CAIRN_OUTBOX, the action queues in the outbox when
	// Redis cannot be reached (start, signal).
	queues bool
}

// parseFunc checks a command's positional arguments and parsed flags and
// returns the action to run once connected.
type parseFunc func(ctx context.Context, pos []string) (action, error)

// commands lists the subcommands in the order the usage shows them.
var commands []*command

// init fills commands. The table and the parse functions refer to each other
// (parseStart -> positional -> lookup -> commands), a cycle that Go refuses
// in a package-level variable's initializer.
func init() { //nolint:gochecknoinits // the parse functions read the table back (see above): an initializer would be an initialization cycle
	commands = slices.Concat(runCommands(), operatorCommands(), queueCommands(), localCommands())
}

// runCommands are the commands that start runs and read them.
func runCommands() []*command {
	return []*command{
		{
			name: "start", synopsis: "start <workflow> [flags]",
			summary: "start a run of a workflow and print its ID",
			flags: []string{
				"--input JSON|@file\trun input: JSON text, @path to read a regular file, @- to read stdin; at most 1 MiB (default {})",
				"--idempotency-key K\tstart at most one run per key: a repeat prints the run the first one started",
				"--ordering-key K\trun after the CLI's earlier runs with key K, in start order (the workflow's ordering.concurrency at once); keys are scoped by owner, and the CLI's runs are owned by cli",
				"--shared-ordering\twith --ordering-key: join the key's shared line, which runs of every owner join, instead of the CLI's own",
				"--wait\twait for the run to end, showing its progress on stderr; exit 1 unless it succeeds (failed, cancelled or compensated)",
				"--json\tprint the run as JSON (with --wait: as it ended) instead of its ID",
			},
			parse: parseStart, queues: true,
		},
		{
			name: "status", synopsis: "status <run-id> [flags]",
			summary: "show a run and the progress of its steps: their groups, and the compensations of a saga",
			flags:   []string{lastFlag, "--json\tprint the run as JSON"},
			parse:   parseStatus,
		},
		{
			name: "list", synopsis: "list [flags]",
			summary: "list runs, newest first",
			flags: []string{
				"--status S\tonly runs in status S: " + orList(statuses),
				"--paused\tonly the paused runs (enqueue pause)",
				fmt.Sprintf("--limit N\tat most N runs, 1 to %d (default %d)", maxListLimit, defaultListLimit),
				"--cursor C\tcontinue a listing where the previous page ended",
				"--id-prefix P\tonly runs whose ID starts with P (a whole ID: that run)",
				"--input COND\tonly runs whose input has COND, input.<path>=<value> (input.customer.id=42, input.email=\"a@b.c\"); repeat to require several",
				"--since T\tonly runs created at or after T: RFC 3339, a date (UTC), or a duration before now (24h, 7d)",
				"--until T\tonly runs created before T (the same forms)",
				fmt.Sprintf("--max-scan N\twith --id-prefix or --input, examine at most N runs a page, 1 to %d (default %d)",
					workflow.MaxSearchScan, workflow.MaxSearchScan),
				"--json\tprint a JSON array of runs",
			},
			parse: parseList,
		},
		{
			name: "events", synopsis: "events <run-id> [flags]",
			summary: "show a run's journal, oldest first",
			flags: []string{lastFlag,
				"--follow\tkeep printing the run's events as they come until it ends (or SIGINT); exit 1 unless it succeeds, as start --wait does",
				"--json\tprint a JSON array of events (with --follow: one JSON event a line)"},
			parse: parseEvents,
		},
	}
}

// operatorCommands are the commands that act on a run: cancel it, resume it, signal it.
func operatorCommands() []*command {
	return []*command{
		{
			name: "cancel", synopsis: "cancel <run-id> [flags]",
			summary: "cancel a pending, running or compensating run (whose compensations then stop), or a failed run that " +
				"blocks its ordering key; cancelling a cancelled run is a no-op",
			flags: []string{
				"--compensate\tcancel, then run the compensations of the run's succeeded steps, last first: the run is " +
					"compensating, then compensated with code cancelled; a failed run can be compensated too (it keeps " +
					"its failure code); a run with nothing to compensate is just cancelled; a repeat is a no-op",
				lastFlag,
				"--json\tprint the run as JSON",
			},
			parse: parseCancel,
		},
		{
			name: "pause", synopsis: "pause <run-id> [flags]",
			summary: "pause a run that has not ended: it begins no new attempt until resumed (an attempt in flight finishes; " +
				"retries, sleeps and breaker deferrals keep their due times); pausing a paused run is a no-op",
			flags: []string{lastFlag, "--json\tprint the run as JSON"},
			parse: parsePause("pause"),
		},
		{
			name: "resume", synopsis: "resume <run-id> [flags]",
			summary: "resume a paused run: what came due while it was paused runs now, the rest at its due time; " +
				"resuming a run that is not paused is a no-op",
			flags: []string{lastFlag, "--json\tprint the run as JSON"},
			parse: parsePause("resume"),
		},
		{
			name: "recover", synopsis: "recover <run-id> [flags]",
			summary: "resume a failed run (or one needing attention) from its last checkpoint, with a fresh budget for the step it stopped at",
			flags:   []string{lastFlag, operatorWaitFlag, "--json\tprint the run as JSON (with --wait: as it ended)"},
			parse:   parseOperator("recover"),
		},
		{
			name: "retry", synopsis: "retry <run-id> --step NAME [flags]",
			summary: "re-run the failed step of a failed run with a fresh budget (or its failed compensation, which then goes on with the saga); " +
				"with --now, start a running run's scheduled retry at once",
			flags: []string{"--step NAME\tthe failed step, or compensate:STEP for the compensation of STEP that failed (required)",
				"--now\tmake the scheduled retry of --step, which the run waits out a backoff for, due at once, with the attempt " +
					"and budget it had (journaled retry_now); refused unless the step waits out a retry's backoff",
				lastFlag, operatorWaitFlag, "--json\tprint the run as JSON (with --wait: as it ended)"},
			parse: parseOperator("retry"),
		},
		{
			name: "skip", synopsis: "skip <run-id> --step NAME [flags]",
			summary: "skip the failed optional step of a failed run and continue with the next (a compensation cannot be skipped)",
			flags: []string{"--step NAME\tthe failed optional step (required)", lastFlag, operatorWaitFlag,
				"--json\tprint the run as JSON (with --wait: as it ended)"},
			parse: parseOperator("skip"),
		},
		{
			name: "signal", synopsis: "signal <run-id> <name> [flags]",
			summary: "send a signal to a run: its await of that name takes the payload as output (a signal sent before the run reaches the await is kept for it)",
			flags: []string{
				"--payload JSON|@file\tthe signal's payload: JSON text, @path to read a regular file, @- to read stdin; at most 64 KiB (default null)",
				"--id ID\tmake the signal idempotent: a second signal with this ID is a no-op",
				"--last\tthe newest run (the first that enqueue list shows): signal --last <name>",
				"--json\tprint the outcome as JSON",
			},
			parse: parseSignal, queues: true,
		},
	}
}

// queueCommands are the commands on the queue's shared state: ordering keys, circuit breakers and workers.
func queueCommands() []*command {
	return []*command{
		{
			name: "key", synopsis: "key <ordering-key> [flags]",
			summary: "show a line of an ordering key: its active runs, then its waiting runs in the order they will start (the CLI's own line unless --owner or --shared)",
			flags: []string{
				"--owner S\tthe line of owner S's runs (S: an API subject, cli, or a Go client's StartOptions.Owner)",
				"--shared\tthe key's shared line (StartOptions.SharedOrdering, runs without an owner)",
				"--json\tprint the line as JSON",
			},
			parse: parseKey,
		},
		{
			name: "breakers", synopsis: "breakers [flags]",
			summary: "list the queue's circuit breakers: state, failures, open until, cooldown, openings, deferrals",
			flags:   []string{"--json\tprint a JSON array of breakers"},
			parse:   parseBreakers,
		},
		{
			name: "workers", synopsis: "workers [flags]",
			summary: "list the queue's live workers: kind, host, pid, queues, attempts in flight of the concurrency, start, version, last heartbeat",
			flags:   []string{"--json\tprint a JSON array of workers"},
			parse:   parseWorkers,
		},
		{
			name: "latency", synopsis: "latency [flags]",
			summary: "show the percentiles (p50, p90, p99) of step run times and waits for a worker, per workflow and step",
			flags: []string{
				"--window W\tthe window: 1h, 24h or 7d (default 24h)",
				"--workflow W\tonly workflow W's steps",
				"--json\tprint the report as JSON, as GET /api/v1/latency answers it",
			},
			parse: parseLatency,
		},
		{
			name: "breaker", synopsis: "breaker reset <name>",
			summary: "close a circuit breaker at once (its deferred attempts start at their scheduled time)",
			parse:   parseBreaker,
		},
	}
}

// localCommands are the commands that need no Redis: the outbox, validation, completion.
func localCommands() []*command {
	return []*command{
		{
			name: "outbox", synopsis: "outbox [flags]",
			summary: "show what the outbox (CAIRN_OUTBOX) holds: the starts and signals queued while Redis was unreachable, in the order they will be sent, and the dead letters Redis refused",
			flags: []string{
				"--json\tprint {\"queued\": [...], \"dead\": [...]} as JSON",
				"--requeue-dead\tqueue the dead letters again, behind the queued entries, and send them if Redis is reachable",
				"--drop-dead\tdelete the dead letters",
			},
			parse: parseOutbox, offline: true,
		},
		{
			name: "validate", synopsis: "validate <file>",
			summary: "check a YAML workflows file (the worker's CAIRN_WORKFLOWS_FILE; at most 8 MiB) without a worker or Redis",
			parse:   parseValidate, offline: true,
		},
		{
			name: "completion", synopsis: "completion bash|zsh|fish|powershell",
			summary: "print the shell completion script of enqueue for bash, zsh, fish or PowerShell, which also completes run IDs " +
				"and workflow names from Redis (the README says how to install it)",
			parse: parseCompletion, standalone: true,
		},
	}
}

// Flags several commands share.
const (
	lastFlag         = "--last\tthe newest run (the first that enqueue list shows) instead of a run ID"
	operatorWaitFlag = "--wait\twait for the run to end, as start --wait does, showing its progress on stderr; exit 1 unless it succeeds"
)

// lookup returns the command called name, or nil.
func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// usage returns the command's help text.
func (c *command) usage() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: enqueue %s\n\n%s.\n", c.synopsis, capitalize(c.summary))
	if len(c.flags) > 0 {
		b.WriteString("\nFlags (before or after the argument):\n")
		writeFlags(&b, c.flags, "  ")
	}
	b.WriteString("\nRun \"enqueue help\" for the exit codes and the environment.\n")
	return b.String()
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// writeFlags writes "name\tdescription" lines in two aligned columns.
func writeFlags(w io.Writer, flags []string, indent string) {
	width := 0
	for _, f := range flags {
		name, _, _ := strings.Cut(f, "\t")
		width = max(width, len(name))
	}
	for _, f := range flags {
		name, desc, _ := strings.Cut(f, "\t")
		fmt.Fprintf(w, "%s%-*s  %s\n", indent, width, name, desc)
	}
}

// usage returns the CLI's help text.
func usage() string {
	var b strings.Builder
	b.WriteString(`Usage: enqueue <command> [arguments] [flags]

enqueue starts Cairn workflow runs, and shows and steers them.

Commands:
`)
	width := 0
	for _, c := range commands {
		width = max(width, len(c.synopsis))
	}
	width = max(width, len("help [command]"))
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-*s  %s\n", width, c.synopsis, c.summary)
		writeFlags(&b, c.flags, "      ")
	}
	fmt.Fprintf(&b, "  %-*s  %s\n", width, "help [command]", "show this help, or a command's")
	b.WriteString(`
Flags may come before or after the argument: "start demo --wait" and
"start --wait demo" are the same. A mistyped command or flag is a usage
error that suggests the closest one (--wiat: did you mean "--wait"?).

A <run-id> is the 26-character ID that start printed, or a prefix of it
that no other run's ID starts with (4 characters or more; an ambiguous
prefix is an error that lists runs it matches). --last, instead of a run
ID, names the newest run. Both look among every run of the queue, whoever
started it, as list does.

Global flags (before the command, or among its flags):
  --no-color  no colour; without it, colour is used only when stdout is a
              terminal and NO_COLOR is unset or empty (https://no-color.org)
  --version   print the version of enqueue and exit
  -h, --help  show this help, or with a command, the command's

Exit codes:
  0  success
  1  the run ended failed, cancelled or compensated (--wait, events
     --follow; a compensated run's steps were undone after a failure), or an operational
     error: Redis unreachable (without CAIRN_OUTBOX), an outbox that is full
     or in use by another process, cancel of a finished run, a cancel, recover,
     retry or skip the run's state refuses; validate found problems (each is a
     FILE:LINE:COL: line on stderr before the summary); interrupted by
     SIGINT or SIGTERM (--wait and --follow leave the run going)
  2  usage error or bad input: unknown command or flag, bad flag value,
     missing or extra argument, malformed or empty --input, an --input
     over 1 MiB, an @file that is missing, unreadable or not a regular
     file (a directory, FIFO, device or socket), unknown workflow, invalid
     or unknown run ID, a prefix that matches no run or several, --last
     without a run, invalid --status, --limit or --cursor, bad
     configuration; a validate file that is missing, unreadable, not a
     regular file or over 8 MiB

Every error is one line on stderr starting with "enqueue: " (validate
first lists the file's problems, one FILE:LINE:COL: line each).

Environment:
  CAIRN_REDIS_URL      redis://[user:password@]host:port[/db] (one server),
                       redis-sentinel://[:password@]host:port[,host:port...][/db]?master=NAME
                       (Sentinel), redis-cluster://[:password@]host:port[,host:port...]
                       (Cluster); rediss... for TLS. Unset: the embedded store a
                       worker started without CAIRN_REDIS_URL, at
                       CAIRN_EMBEDDED_ADDR (default 127.0.0.1:6390).
  CAIRN_REDIS_MIN_REPLICAS  state writes wait until this many replicas have
                       them (default 0: do not wait; see docs/redis.md)
  CAIRN_QUEUE          the workers' queue (default workflows)
  CAIRN_RETENTION      how long a cancelled run is kept (default 168h); match
                       the workers'
  CAIRN_LOG_LEVEL      the CLI shows the client's warnings and errors on
                       stderr; error hides the warnings (default info)
  CAIRN_LOG_FORMAT     text or json (default text)
  CAIRN_OUTBOX         a file (created on first use) where start and signal
                       queue while Redis is unreachable: they print "queued"
                       and the run ID and exit 0. Every command that reaches
                       Redis first sends what it holds, in order (at most
                       10s; a failure is a warning on stderr); enqueue outbox
                       shows it. Unset: no outbox.
The other CAIRN_* variables of the worker are validated too.
`)
	return b.String()
}

// orList joins words as "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// positional checks that exactly one positional argument, what, was given.
func positional(cmd string, pos []string, what string) (string, error) {
	switch {
	case len(pos) == 0:
		return "", usageErrorf("%s: missing %s (usage: enqueue %s)", cmd, what, lookup(cmd).synopsis)
	case len(pos) > 1:
		return "", usageErrorf("%s: unexpected argument %q (usage: enqueue %s)", cmd, pos[1], lookup(cmd).synopsis)
	}
	return pos[0], nil
}

// noPositional checks that no positional argument was given.
func noPositional(cmd string, pos []string) error {
	if len(pos) > 0 {
		return usageErrorf("%s: unexpected argument %q (usage: enqueue %s)", cmd, pos[0], lookup(cmd).synopsis)
	}
	return nil
}
