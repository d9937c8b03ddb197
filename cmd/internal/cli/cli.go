package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"
	"golang.org/x/term"

	"github.com/cairnhq/cairn/cmd/internal/config"
	"github.com/cairnhq/cairn/cmd/internal/otelsetup"
	"github.com/cairnhq/cairn/workflow"
)

// Exit codes.
const (
	// ExitOK: the command succeeded.
	ExitOK = 0
	// ExitFailure: the run ended failed, cancelled or compensated (start
	// --wait), or an operational error (Redis unreachable, cancel of a
	// finished run, an action the run's state refuses).
	ExitFailure = 1
	// ExitUsage: a usage error or bad input.
	ExitUsage = 2
)

// Timeouts of the Redis connection. They are short so that an unreachable
// Redis is reported within a few seconds; a CAIRN_REDIS_URL that sets
// dial_timeout, read_timeout or write_timeout overrides them.
const (
	dialTimeout  = 2 * time.Second
	ioTimeout    = 3 * time.Second
	pingTimeout  = 3 * time.Second
	dialAttempts = 2
)

// DefaultPollInterval is how often start --wait reads the run.
const DefaultPollInterval = 200 * time.Millisecond

// CLI is one invocation's environment. The zero value of each optional
// field takes the default given in its comment.
type CLI struct {
	// Stdin is read by start --input @-, at most 1 MiB and 1 byte, until
	// Run's context is done (a Read that blocks then is left behind); nil
	// reads as empty.
	Stdin io.Reader
	// Stdout receives the results, Stderr progress and errors; both are
	// required.
	Stdout io.Writer
	Stderr io.Writer
	// Environ is the environment, as os.Environ returns it; the
	// configuration is read from it and nowhere else.
	Environ []string
	// IsTerminal reports whether w is a terminal: when stdout and stderr
	// both are, --wait rewrites its countdown line in place; otherwise it
	// prints a line per change. Default IsTerminal.
	IsTerminal func(w io.Writer) bool
	// PollInterval is how often start --wait reads the run. Default
	// DefaultPollInterval.
	PollInterval time.Duration
	// Now tells the time for countdowns. Default workflow.SystemClock.Now.
	Now func() time.Time
	// OutboxLockTimeout bounds the wait for another process that has the
	// outbox (CAIRN_OUTBOX) open. Default 15s.
	OutboxLockTimeout time.Duration
	// Width returns the width of terminal w, in columns, or 0 when it
	// cannot tell. Default TerminalWidth. $COLUMNS, then 80, stand in for
	// a 0.
	Width func(w io.Writer) int

	// noColor is set by the flag --no-color.
	noColor bool
}

// Main runs the CLI with args (without the program name) and returns the
// exit code. It is the whole program: it also silences go-redis's
// process-wide logger, which would print its own lines about failed dials
// on os.Stderr next to the CLI's one-line error.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, environ []string) int {
	logging.Disable()
	c := &CLI{Stdin: stdin, Stdout: stdout, Stderr: stderr, Environ: environ}
	return c.Run(ctx, args)
}

// IsTerminal reports whether w is an *os.File open on a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// TerminalWidth returns the width, in columns, of the terminal w is open
// on, or 0 when w is not an *os.File on a terminal.
func TerminalWidth(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok {
		return 0
	}
	width, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return 0
	}
	return width
}

func (c *CLI) isTerminal(w io.Writer) bool {
	if c.IsTerminal != nil {
		return c.IsTerminal(w)
	}
	return IsTerminal(w)
}

// minColumns is the least terminal width the CLI lays its lines out for.
const minColumns = 20

// columns returns the width of terminal w: as the terminal tells it, else
// $COLUMNS, else 80.
func (c *CLI) columns(w io.Writer) int {
	width := c.Width
	if width == nil {
		width = TerminalWidth
	}
	if n := width(w); n >= minColumns {
		return n
	}
	if n, err := strconv.Atoi(c.getenv("COLUMNS")); err == nil && n >= minColumns {
		return n
	}
	return 80
}

// getenv returns the value of the environment variable name, or "".
func (c *CLI) getenv(name string) string {
	v := ""
	for _, kv := range c.Environ {
		if val, ok := strings.CutPrefix(kv, name+"="); ok {
			v = val // the last one wins, as with os.Getenv's setenv
		}
	}
	return v
}

// color reports whether to colour what is written to w: only on a
// terminal, without --no-color, with NO_COLOR unset or empty
// (https://no-color.org) and TERM not "dumb".
func (c *CLI) color(w io.Writer) bool {
	return !c.noColor && c.getenv("NO_COLOR") == "" && c.getenv("TERM") != "dumb" && c.isTerminal(w)
}

// layout is how stdout's tables are laid out: to the terminal's width, in
// colour, or neither (not a terminal).
func (c *CLI) layout() layout {
	if !c.isTerminal(c.Stdout) {
		return layout{}
	}
	return layout{width: c.columns(c.Stdout), color: c.color(c.Stdout)}
}

func (c *CLI) pollInterval() time.Duration {
	if c.PollInterval > 0 {
		return c.PollInterval
	}
	return DefaultPollInterval
}

func (c *CLI) outboxLockTimeout() time.Duration {
	if c.OutboxLockTimeout > 0 {
		return c.OutboxLockTimeout
	}
	return outboxLockTimeout
}

func (c *CLI) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return workflow.SystemClock.Now()
}

// action is a parsed command, run once connected.
type action func(ctx context.Context, s *session) error

// fail reports err, if any, as one line on stderr and returns its exit code.
func (c *CLI) fail(err error) int {
	if err == nil {
		return ExitOK
	}
	fmt.Fprintf(c.Stderr, "enqueue: %s\n", oneLine(err.Error()))
	return exitCode(err)
}

// configFail reports each configuration problem on a line of its own.
func (c *CLI) configFail(err error) int {
	for _, e := range flatten(err) {
		fmt.Fprintf(c.Stderr, "enqueue: bad configuration: %s\n", oneLine(e.Error()))
	}
	return ExitUsage
}

// flatten lists the errors joined in err.
func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

// exitError is an error with the exit code it causes.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// usageErrorf returns a usage or bad-input error (exit code 2).
func usageErrorf(format string, args ...any) error {
	return &exitError{code: ExitUsage, msg: fmt.Sprintf(format, args...)}
}

// failuref returns an operational error (exit code 1).
func failuref(format string, args ...any) error {
	return &exitError{code: ExitFailure, msg: fmt.Sprintf(format, args...)}
}

// badInput are the workflow errors that mean the caller's input was wrong.
var badInput = []error{
	workflow.ErrUnknownWorkflow, workflow.ErrInvalidRunID, workflow.ErrRunNotFound,
	workflow.ErrInvalidInput, workflow.ErrInvalidStatus, workflow.ErrIdempotencyConflict,
	workflow.ErrInvalidCursor, workflow.ErrBreakerNotFound, errAmbiguousRunID,
}

// exitCode maps an error to the exit code it causes.
func exitCode(err error) int {
	if ee, ok := errors.AsType[*exitError](err); ok {
		return ee.code
	}
	for _, target := range badInput {
		if errors.Is(err, target) {
			return ExitUsage
		}
	}
	return ExitFailure
}

// oneLine folds s onto one line.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	lines := strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' })
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return strings.Join(lines, "; ")
}

// session is a connection to the workflow state.
type session struct {
	tracing *otelsetup.Tracing // set by clientConfig
	cli     *CLI
	cfg     config.Config
	addr    string // the Redis, for messages: host:port, or config.RedisTarget.String
	rdb     redis.UniversalClient
	client  *workflow.Client
}

// newRedis builds the Redis client of the configuration (one server,
// Sentinel or a Cluster), with the CLI's short timeouts, and the address of
// the Redis for messages (host:port, or the deployment without its
// password).
func (c *CLI) newRedis(cfg config.Config) (redis.UniversalClient, string, error) {
	target, err := cfg.Redis()
	if err != nil {
		return nil, "", usageErrorf("bad configuration: %v", err)
	}
	target.DefaultTimeouts(config.Timeouts{Dial: dialTimeout, Read: ioTimeout, Write: ioTimeout, DialerRetries: dialAttempts})
	rdb := target.NewClient()
	config.WaitForReplicas(rdb, cfg.RedisMinReplicas, cfg.RedisMinReplicasTimeout, c.logger(cfg))
	addr := target.String()
	if target.Single != nil {
		addr = target.Single.Addr
	}
	return rdb, addr, nil
}

// logger is the CLI's structured logger: warnings and errors on stderr.
func (c *CLI) logger(cfg config.Config) *slog.Logger {
	level, _ := cfg.SlogLevel()
	hopts := &slog.HandlerOptions{Level: max(level, slog.LevelWarn)}
	var h slog.Handler = slog.NewTextHandler(c.Stderr, hopts)
	if cfg.LogFormat == "json" {
		h = slog.NewJSONHandler(c.Stderr, hopts)
	}
	return slog.New(h)
}

// connect builds the Redis client and checks that Redis answers.
func (c *CLI) connect(ctx context.Context, cfg config.Config) (*session, error) {
	rdb, addr, err := c.newRedis(cfg)
	if err != nil {
		return nil, err
	}
	s := &session{cli: c, cfg: cfg, addr: addr, rdb: rdb}
	s.client = workflow.NewClient(rdb, s.clientConfig(""))
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	// The node that serves the queue answers: on a Redis Cluster, the
	// master of the queue's slot; otherwise the server (for Sentinel, the
	// current master).
	if err := workflow.PingQueue(pctx, rdb, cfg.Queue); err != nil {
		_ = rdb.Close()
		if ctx.Err() != nil {
			return nil, failuref("interrupted while connecting to Redis at %s", addr)
		}
		if _, ok := errors.AsType[redis.Error](err); ok {
			return nil, failuref("Redis at %s refused the connection: %v (check CAIRN_REDIS_URL)", addr, err)
		}
		hint := "is Redis running there? check CAIRN_REDIS_URL"
		if cfg.Embedded() {
			hint = "is the worker running? with CAIRN_REDIS_URL unset the CLI talks to the embedded store a worker started"
		}
		return nil, failuref("cannot reach Redis at %s: %v (%s)", addr, err, hint)
	}
	return s, nil
}

// connectOutbox builds the Redis client, without checking that Redis
// answers, and a client with the outbox, which it flushes.
func (c *CLI) connectOutbox(ctx context.Context, cfg config.Config) (*session, error) {
	rdb, addr, err := c.newRedis(cfg)
	if err != nil {
		return nil, err
	}
	s := &session{cli: c, cfg: cfg, addr: addr, rdb: rdb}
	if err := s.openOutbox(ctx, true); err != nil {
		_ = rdb.Close()
		return nil, err
	}
	return s, nil
}

// clientConfig is the workflow client's configuration, with the outbox
// file outbox ("" for none).
func (s *session) clientConfig(outbox string) workflow.ClientConfig {
	log := s.cli.logger(s.cfg)
	if s.tracing == nil {
		// OpenTelemetry, as the OTEL_* environment asks (see the worker):
		// a start's span joins the trace of TRACEPARENT, if set. A setting
		// the SDK cannot use is worth a warning, not a refused command.
		tr, err := otelsetup.FromEnv(context.Background(), "cairn-enqueue", s.cli.getenv)
		if err != nil {
			log.Warn("tracing off", "error", err)
			tr = &otelsetup.Tracing{Shutdown: func(context.Context) error { return nil }}
		}
		s.tracing = tr
	}
	return workflow.ClientConfig{
		Queue:             s.cfg.Queue,
		Retention:         s.cfg.Retention,
		MaxInputBytes:     maxInputBytes,
		Logger:            log,
		Outbox:            outbox,
		OutboxLockTimeout: s.cli.outboxLockTimeout(),
		TracerProvider:    s.tracing.Provider,
	}
}

func (s *session) close() {
	if s.client != nil {
		_ = s.client.Close() // the outbox, if any
	}
	if s.tracing != nil {
		// Export the start's span before the process exits.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = s.tracing.Shutdown(ctx)
		cancel()
	}
	if s.rdb != nil {
		_ = s.rdb.Close()
	}
}

// stdout and stderr are the invocation's streams.
func (s *session) stdout() io.Writer { return s.cli.Stdout }
func (s *session) stderr() io.Writer { return s.cli.Stderr }
