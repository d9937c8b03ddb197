// Package config reads the worker's and the CLI's configuration from the
// environment (with caarlos0/env), applies the documented defaults and
// validates it. Every error names the variable at fault.
package config

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/cairnhq/cairn/webhook"
	"github.com/cairnhq/cairn/workflow"
)

// DefaultEmbeddedAddr is where the embedded store listens when
// CAIRN_REDIS_URL is unset.
const DefaultEmbeddedAddr = "127.0.0.1:6390"

// Config is the configuration of the worker and the CLI.
//
// The table of docs/configuration.md is generated from it (reference_test.go;
// regenerate it with `go test ./cmd/internal/config -run
// TestConfigurationReference -update`): a row per field with an env tag, in
// this order, its default from the envDefault tag, and its meaning from the
// field's doc comment, which starts "Field is" or "Field are" and goes on in
// Markdown, for operators (links relative to docs/).
type Config struct {
	// RedisURL is the Redis: `redis://[user:password@]host:port[/db]` (one
	// server), `redis-sentinel://[:password@]host:port[,host:port...][/db]?master=NAME`
	// (Sentinel), `redis-cluster://[:password@]host:port[,host:port...]`
	// (Cluster); `rediss...` for TLS (see
	// [Redis](redis.md#redis-one-server-sentinel-or-a-cluster); ParseRedisURL).
	// Unset: the worker starts the embedded, non-durable store and the CLI
	// talks to it.
	RedisURL string `env:"CAIRN_REDIS_URL"`
	// RedisMinReplicas is how many replicas every state write waits for
	// (`WAIT`), for at most `CAIRN_REDIS_MIN_REPLICAS_TIMEOUT`; a write they
	// do not confirm in time is logged and counted, not undone. 0: do not
	// wait (see
	// [`CAIRN_REDIS_MIN_REPLICAS`](redis.md#cairn_redis_min_replicas-writes-that-wait-for-replicas)).
	RedisMinReplicas int `env:"CAIRN_REDIS_MIN_REPLICAS" envDefault:"0"`
	// RedisMinReplicasTimeout is how long a state write waits for those
	// replicas; less than the Redis read timeout.
	RedisMinReplicasTimeout time.Duration `env:"CAIRN_REDIS_MIN_REPLICAS_TIMEOUT" envDefault:"1s"`
	// EmbeddedAddr is the loopback address of the embedded store (with
	// `CAIRN_REDIS_URL` unset).
	EmbeddedAddr string `env:"CAIRN_EMBEDDED_ADDR" envDefault:"127.0.0.1:6390"`
	// Queue is the asynq queue of step tasks; also the Redis Cluster hash
	// tag of the workflow state.
	Queue string `env:"CAIRN_QUEUE" envDefault:"workflows"`
	// Concurrency is how many step attempts a worker runs at once (1 to
	// 10000).
	Concurrency int `env:"CAIRN_CONCURRENCY" envDefault:"10"`
	// LogLevel is `debug`, `info`, `warn` or `error`.
	LogLevel string `env:"CAIRN_LOG_LEVEL" envDefault:"info"`
	// LogFormat is `text` or `json` (log/slog; every line about a run has
	// `run_id`, `step`, `attempt`).
	LogFormat string `env:"CAIRN_LOG_FORMAT" envDefault:"text"`

	// The worker's default retry policy and limits, CAIRN_RETRY_MAX_ATTEMPTS
	// to CAIRN_MAX_CRASHES; workflows and steps override them.

	// RetryMaxAttempts is the attempts per step, the first included; a
	// workflow's or a step's policy overrides it, as it does the variables
	// down to `CAIRN_MAX_CRASHES`.
	RetryMaxAttempts int `env:"CAIRN_RETRY_MAX_ATTEMPTS" envDefault:"4"`
	// RetryInitialInterval is the delay before the first retry.
	RetryInitialInterval time.Duration `env:"CAIRN_RETRY_INITIAL_INTERVAL" envDefault:"1s"`
	// RetryBackoff is how the delay grows: `exponential`, `linear` or
	// `fixed`.
	RetryBackoff string `env:"CAIRN_RETRY_BACKOFF" envDefault:"exponential"`
	// RetryBackoffCoefficient is the growth of the delay per retry (at
	// least 1).
	RetryBackoffCoefficient float64 `env:"CAIRN_RETRY_BACKOFF_COEFFICIENT" envDefault:"2"`
	// RetryMaxInterval is the cap of the delay, before jitter.
	RetryMaxInterval time.Duration `env:"CAIRN_RETRY_MAX_INTERVAL" envDefault:"30s"`
	// RetryJitter is `none`, `full` or `equal`.
	RetryJitter string `env:"CAIRN_RETRY_JITTER" envDefault:"equal"`
	// UnknownErrors is how unclassified errors count: `transient` or
	// `permanent`.
	UnknownErrors string `env:"CAIRN_UNKNOWN_ERRORS" envDefault:"transient"`
	// StepTimeout is the bound of one attempt; a timeout is a transient
	// failure.
	StepTimeout time.Duration `env:"CAIRN_STEP_TIMEOUT" envDefault:"15m"`
	// RunTimeout is the bound of a whole run from its creation, which then
	// fails with `run_timeout`; 0s: none.
	RunTimeout time.Duration `env:"CAIRN_RUN_TIMEOUT" envDefault:"0s"`
	// MaxIterations is the bound of step executions per run, retries
	// included; 0: none.
	MaxIterations int `env:"CAIRN_MAX_ITERATIONS" envDefault:"0"`
	// MaxCrashes is how many worker crashes one step survives.
	MaxCrashes int `env:"CAIRN_MAX_CRASHES" envDefault:"3"`

	// Retention is how long finished runs are kept.
	Retention time.Duration `env:"CAIRN_RETENTION" envDefault:"168h"`
	// TaskCheckInterval is asynq's idle poll interval, with
	// `CAIRN_DEQUEUE=asynq`.
	TaskCheckInterval time.Duration `env:"CAIRN_TASK_CHECK_INTERVAL" envDefault:"20ms"`
	// DelayedTaskCheckInterval is how often asynq's forwarder moves due
	// tasks to the queue, with `CAIRN_DEQUEUE=asynq`: its retries of
	// deliveries, and, as a fallback at the whole second, the timers the
	// worker's promoter moves at their millisecond (the own dequeue does
	// the same once a second).
	DelayedTaskCheckInterval time.Duration `env:"CAIRN_DELAYED_TASK_CHECK_INTERVAL" envDefault:"200ms"`
	// ShutdownTimeout is how long SIGINT/SIGTERM waits for running steps.
	ShutdownTimeout time.Duration `env:"CAIRN_SHUTDOWN_TIMEOUT" envDefault:"30s"`

	// ReconcileInterval is the time between full reconciliation passes.
	ReconcileInterval time.Duration `env:"CAIRN_RECONCILE_INTERVAL" envDefault:"30s"`
	// RecoveryConcurrency is how many repairs that take calls of their own
	// are in flight (crashed attempts, deadlines, stalled deliveries; a
	// pass's task checks go 200 runs to a pipeline, two in flight).
	RecoveryConcurrency int `env:"CAIRN_RECOVERY_CONCURRENCY" envDefault:"5"`
	// MaxAutoRecoveries is how many automatic repairs one run gets before
	// it is left for an operator.
	MaxAutoRecoveries int `env:"CAIRN_MAX_AUTO_RECOVERIES" envDefault:"3"`
	// FenceTTL is how long a running attempt owns its step between
	// renewals (renewed every third of it, a `renew.lua` call a second per
	// running step): a killed worker's step resumes on another worker about
	// this plus `CAIRN_SWEEP_INTERVAL` later; a worker that cannot reach
	// Redis for about two thirds of it stops its steps and hands them back.
	// Keep it at least 1.5 × (`CAIRN_SWEEP_INTERVAL` + 1s).
	FenceTTL time.Duration `env:"CAIRN_FENCE_TTL" envDefault:"3s"`
	// SweepInterval is how often the reconciler looks for attempts of dead
	// workers (a sweep with nothing due is one round trip of one or two
	// reads, and takes no lock).
	SweepInterval time.Duration `env:"CAIRN_SWEEP_INTERVAL" envDefault:"500ms"`

	// Demo is whether a worker on Redis registers the demo workflow
	// (`demo`); the embedded store (`CAIRN_REDIS_URL` unset, `make run`)
	// always has it, and `CAIRN_DEMO_CHAOS` implies it. Without it a worker
	// on Redis runs only the workflows of `CAIRN_WORKFLOWS_FILE`.
	Demo bool `env:"CAIRN_DEMO" envDefault:"false"`
	// DemoChaos is whether the worker also registers the test suites' demo
	// workflows: `chaos` and `chaos-saga` (the chaos suite) and `ordered`,
	// `ordered-c3`, `ordered-release`, `limited` (the ordering suite); it
	// implies `CAIRN_DEMO`.
	DemoChaos bool `env:"CAIRN_DEMO_CHAOS" envDefault:"false"`

	// WorkflowsFile is a YAML file of workflow definitions the worker
	// registers at start (see [YAML workflows](yaml.md); package
	// workflow/yamldef); unset: none.
	WorkflowsFile string `env:"CAIRN_WORKFLOWS_FILE"`
	// HTTPStepMaxBody is the largest response an http step reads, in
	// bytes: header names and values and body together.
	HTTPStepMaxBody int `env:"CAIRN_HTTP_STEP_MAX_BODY" envDefault:"1048576"`

	// WebhookURL is the `http://` or `https://` URL that receives run
	// notifications, signed (see [Webhooks](webhooks.md)); unset: none.
	WebhookURL string `env:"CAIRN_WEBHOOK_URL"`
	// WebhookSecret is the key of the deliveries' HMAC-SHA256 signature
	// (Standard Webhooks): `whsec_` and base64, or any other string, whose
	// bytes are the key; required with `CAIRN_WEBHOOK_URL`.
	WebhookSecret string `env:"CAIRN_WEBHOOK_SECRET"`
	// WebhookPreviousSecret is the old secret while the secret is
	// rotated: it also signs every delivery (receivers accept either);
	// unset: none.
	WebhookPreviousSecret string `env:"CAIRN_WEBHOOK_PREVIOUS_SECRET"`
	// WebhookEvents are the notification types delivered, comma-separated
	// (see [Webhooks](webhooks.md)); unset: `run_failed`, `run_succeeded`,
	// `run_cancelled`, `run_recovered`, `run_needs_attention`.
	WebhookEvents string `env:"CAIRN_WEBHOOK_EVENTS"`

	// HTTPAddr is where the worker serves the HTTP API, the dashboard and
	// asynqmon (see [HTTP API](http-api.md); package dashboard); set but
	// empty: no HTTP server. Anything but a loopback address needs
	// `CAIRN_API_TOKENS_FILE`. A set address the worker cannot listen on
	// stops it; the default one in use is a warning (below the table).
	HTTPAddr string `env:"CAIRN_HTTP_ADDR" envDefault:"127.0.0.1:8080"`
	// HTTPAddrSet reports that CAIRN_HTTP_ADDR is in the environment, with
	// any value: the address is the operator's choice, so a worker that
	// cannot listen on it exits, where the default address being in use is
	// a warning.
	HTTPAddrSet bool
	// APITokensFile is the file of API tokens, `<token> <subject> <role>`
	// per line (see [Authentication](http-api.md#authentication)); unset:
	// authentication is disabled (loopback only).
	APITokensFile string `env:"CAIRN_API_TOKENS_FILE"`
	// DashboardSecret is the secret the dashboard's CSRF key is derived
	// from (HKDF-SHA256; dashboard.CSRFKeyFromSecret), the same on every
	// replica so that each accepts the others' CSRF tokens; at least 32
	// bytes (`openssl rand -hex 32`). Unset: a
	// random key per process.
	DashboardSecret Secret `env:"CAIRN_DASHBOARD_SECRET"`
	// MonitoringWrite is whether admins may change tasks and queues in
	// asynqmon at `/monitoring`; `false`: read-only.
	MonitoringWrite bool `env:"CAIRN_MONITORING_WRITE" envDefault:"false"`

	// Outbox is the CLI's outbox file, CLI only
	// (workflow.ClientConfig.Outbox; created on first use, in a directory
	// that exists): `start` and `signal` queue there while Redis is
	// unreachable, and every command that reaches Redis first sends what it
	// holds; unset: no outbox (see [Operators](cli.md#operators)).
	Outbox string `env:"CAIRN_OUTBOX"`
}

// Error is a configuration error naming its variable.
type Error struct {
	Var string
	Msg string
}

func (e *Error) Error() string { return e.Var + ": " + e.Msg }

// Load reads the configuration from environ (as os.Environ returns it) and
// validates it.
func Load(environ []string) (Config, error) {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	var c Config
	perr := env.ParseWithOptions(&c, env.Options{Environment: m})
	if v, set := m["CAIRN_HTTP_ADDR"]; set {
		c.HTTPAddrSet = true
		if v == "" {
			c.HTTPAddr = "" // unlike the others, set but empty is not the default: it is "off"
		}
	}
	if perr == nil {
		return c, c.Validate()
	}
	// Report every problem at once: the parse errors, and the validation
	// errors of the variables that did parse.
	parseErrs := namedErrors(perr)
	failed := map[string]bool{}
	for _, e := range unjoin(parseErrs) {
		if ce, ok := errors.AsType[*Error](e); ok {
			failed[ce.Var] = true
		}
	}
	errs := unjoin(parseErrs)
	for _, e := range unjoin(c.Validate()) {
		var ce *Error
		if errors.As(e, &ce) && failed[ce.Var] {
			continue
		}
		errs = append(errs, e)
	}
	return Config{}, errors.Join(errs...)
}

func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// namedErrors rewrites caarlos0/env's errors, which name struct fields, to
// name the environment variables.
func namedErrors(err error) error {
	var agg env.AggregateError
	if !errors.As(err, &agg) {
		return err
	}
	var out []error
	for _, e := range agg.Errors {
		if pe, ok := errors.AsType[env.ParseError](e); ok {
			out = append(out, &Error{Var: varOf(pe.Name), Msg: fmt.Sprintf("cannot parse as %s: %v", typeName(pe.Type), unwrapAll(pe.Err))})
			continue
		}
		out = append(out, e)
	}
	return errors.Join(out...)
}

func unwrapAll(err error) error {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		err = u
	}
}

func typeName(t reflect.Type) string {
	if t == reflect.TypeFor[time.Duration]() {
		return "a duration (like 500ms, 30s, 2h)"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int64:
		return "an integer"
	case reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	default:
		return t.String()
	}
}

func varOf(field string) string {
	if f, ok := reflect.TypeFor[Config]().FieldByName(field); ok {
		return f.Tag.Get("env")
	}
	return field
}

// Validate checks values the parser cannot.
func (c Config) Validate() error {
	var errs []error
	bad := func(v, format string, args ...any) {
		errs = append(errs, &Error{Var: v, Msg: fmt.Sprintf(format, args...)})
	}
	c.validateRedis(bad)
	c.validateWorker(bad)
	c.validateRetry(bad)
	c.validateDurations(bad)
	c.validateLimits(bad)
	c.validateDashboardSecret(bad)
	c.validateWebhook(bad)
	c.validateHTTP(bad)
	c.validateOutbox(bad)
	return errors.Join(errs...)
}

// validateWorker checks the embedded store's address (loopback only), the
// queue's name, the concurrency and the log's level and format.
func (c Config) validateWorker(bad func(v, format string, args ...any)) {
	if host, _, err := net.SplitHostPort(c.EmbeddedAddr); err != nil {
		bad("CAIRN_EMBEDDED_ADDR", "%q: want host:port (%v)", c.EmbeddedAddr, err)
	} else if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		bad("CAIRN_EMBEDDED_ADDR", "%q: the embedded store has no authentication; want a loopback address like 127.0.0.1:6390", c.EmbeddedAddr)
	}
	if c.Queue == "" || strings.ContainsAny(c.Queue, "{}: \t\n") {
		bad("CAIRN_QUEUE", "%q: want a non-empty name without braces, colons or spaces", c.Queue)
	}
	if c.Concurrency < 1 || c.Concurrency > 10000 {
		bad("CAIRN_CONCURRENCY", "%d: want 1 to 10000", c.Concurrency)
	}
	if _, err := c.SlogLevel(); err != nil {
		bad("CAIRN_LOG_LEVEL", "%q: want debug, info, warn or error", c.LogLevel)
	}
	if f := strings.ToLower(c.LogFormat); f != "text" && f != "json" {
		bad("CAIRN_LOG_FORMAT", "%q: want text or json", c.LogFormat)
	}
}

// validateRetry checks the default retry policy (attempts, intervals,
// backoff and its coefficient, jitter) and how unknown errors count.
func (c Config) validateRetry(bad func(v, format string, args ...any)) {
	if c.RetryMaxAttempts < 1 {
		bad("CAIRN_RETRY_MAX_ATTEMPTS", "%d: want at least 1", c.RetryMaxAttempts)
	}
	if c.RetryInitialInterval <= 0 {
		bad("CAIRN_RETRY_INITIAL_INTERVAL", "%s: want a positive duration", c.RetryInitialInterval)
	}
	if c.RetryBackoffCoefficient < 1 || math.IsNaN(c.RetryBackoffCoefficient) || math.IsInf(c.RetryBackoffCoefficient, 0) {
		bad("CAIRN_RETRY_BACKOFF_COEFFICIENT", "%v: want at least 1", c.RetryBackoffCoefficient)
	}
	if c.RetryMaxInterval < c.RetryInitialInterval {
		bad("CAIRN_RETRY_MAX_INTERVAL", "%s: want at least CAIRN_RETRY_INITIAL_INTERVAL (%s)", c.RetryMaxInterval, c.RetryInitialInterval)
	}
	switch workflow.Backoff(strings.ToLower(c.RetryBackoff)) {
	case workflow.BackoffExponential, workflow.BackoffLinear, workflow.BackoffFixed:
	default:
		bad("CAIRN_RETRY_BACKOFF", "%q: want exponential, linear or fixed", c.RetryBackoff)
	}
	switch workflow.Jitter(strings.ToLower(c.RetryJitter)) {
	case workflow.JitterNone, workflow.JitterFull, workflow.JitterEqual:
	default:
		bad("CAIRN_RETRY_JITTER", "%q: want none, full or equal", c.RetryJitter)
	}
	switch workflow.ErrorMode(strings.ToLower(c.UnknownErrors)) {
	case workflow.UnknownTransient, workflow.UnknownPermanent:
	default:
		bad("CAIRN_UNKNOWN_ERRORS", "%q: want transient or permanent", c.UnknownErrors)
	}
}

// validateDurations checks the timeouts and intervals: positive (the run
// timeout: zero or more), and a fence TTL of at least 300ms.
func (c Config) validateDurations(bad func(v, format string, args ...any)) {
	nonNeg := func(v string, d time.Duration) {
		if d < 0 {
			bad(v, "%s: want a duration of zero or more", d)
		}
	}
	positive := func(v string, d time.Duration) {
		if d <= 0 {
			bad(v, "%s: want a positive duration", d)
		}
	}
	positive("CAIRN_STEP_TIMEOUT", c.StepTimeout)
	nonNeg("CAIRN_RUN_TIMEOUT", c.RunTimeout)
	positive("CAIRN_RETENTION", c.Retention)
	positive("CAIRN_TASK_CHECK_INTERVAL", c.TaskCheckInterval)
	positive("CAIRN_DELAYED_TASK_CHECK_INTERVAL", c.DelayedTaskCheckInterval)
	positive("CAIRN_SHUTDOWN_TIMEOUT", c.ShutdownTimeout)
	positive("CAIRN_RECONCILE_INTERVAL", c.ReconcileInterval)
	positive("CAIRN_SWEEP_INTERVAL", c.SweepInterval)
	if c.FenceTTL < 300*time.Millisecond {
		bad("CAIRN_FENCE_TTL", "%s: want at least 300ms", c.FenceTTL)
	}
}

// validateLimits checks the counts: recovery concurrency, automatic
// recoveries, iterations, crashes, and the http step's body size.
func (c Config) validateLimits(bad func(v, format string, args ...any)) {
	if c.RecoveryConcurrency < 1 || c.RecoveryConcurrency > 1000 {
		bad("CAIRN_RECOVERY_CONCURRENCY", "%d: want 1 to 1000", c.RecoveryConcurrency)
	}
	if c.MaxAutoRecoveries < 1 {
		bad("CAIRN_MAX_AUTO_RECOVERIES", "%d: want at least 1", c.MaxAutoRecoveries)
	}
	if c.MaxIterations < 0 {
		bad("CAIRN_MAX_ITERATIONS", "%d: want 0 (no limit) or more", c.MaxIterations)
	}
	if c.MaxCrashes < 1 {
		bad("CAIRN_MAX_CRASHES", "%d: want at least 1", c.MaxCrashes)
	}
	if c.HTTPStepMaxBody < 1 {
		bad("CAIRN_HTTP_STEP_MAX_BODY", "%d: want at least 1 (bytes)", c.HTTPStepMaxBody)
	}
}

// SlogLevel returns the log level.
func (c Config) SlogLevel() (slog.Level, error) {
	var l slog.Level
	err := l.UnmarshalText([]byte(c.LogLevel))
	return l, err
}

// Policy returns the global policy the variables describe.
func (c Config) Policy() workflow.Policy {
	return workflow.Policy{
		MaxAttempts:        c.RetryMaxAttempts,
		InitialInterval:    c.RetryInitialInterval,
		Backoff:            workflow.Backoff(strings.ToLower(c.RetryBackoff)),
		BackoffCoefficient: c.RetryBackoffCoefficient,
		MaxInterval:        c.RetryMaxInterval,
		Jitter:             workflow.Jitter(strings.ToLower(c.RetryJitter)),
		UnknownErrors:      workflow.ErrorMode(strings.ToLower(c.UnknownErrors)),
		StepTimeout:        c.StepTimeout,
		RunTimeout:         c.RunTimeout,
		MaxIterations:      c.MaxIterations,
		MaxCrashes:         c.MaxCrashes,
	}
}

// EffectiveRedisURL is the Redis to talk to: CAIRN_REDIS_URL, or the
// embedded store's address when it is unset.
func (c Config) EffectiveRedisURL() string {
	if c.RedisURL != "" {
		return c.RedisURL
	}
	return "redis://" + c.EmbeddedAddr
}

// Embedded reports whether the embedded store is in use.
func (c Config) Embedded() bool { return c.RedisURL == "" }

// RegistersDemo reports whether the worker registers the demo workflow:
// on the embedded store (make run), or when CAIRN_DEMO (or
// CAIRN_DEMO_CHAOS) asks for it. A worker on Redis runs the operator's
// workflows only, unless asked.
func (c Config) RegistersDemo() bool { return c.Embedded() || c.Demo || c.DemoChaos }

// Logger returns the structured logger the variables describe, writing to w.
func (c Config) Logger(w io.Writer) *slog.Logger {
	level, _ := c.SlogLevel()
	opts := &slog.HandlerOptions{Level: level}
	if strings.EqualFold(c.LogFormat, "json") {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// validateWebhook checks the CAIRN_WEBHOOK_* variables. A bad URL is
// reported alone: the secret is checked once the URL is right.
func (c Config) validateWebhook(bad func(v, format string, args ...any)) {
	if c.WebhookURL == "" {
		if c.WebhookSecret != "" {
			bad("CAIRN_WEBHOOK_SECRET", "set, but CAIRN_WEBHOOK_URL is unset: set the URL to deliver webhooks to")
		}
		if c.WebhookEvents != "" {
			bad("CAIRN_WEBHOOK_EVENTS", "set, but CAIRN_WEBHOOK_URL is unset: set the URL to deliver webhooks to")
		}
		if c.WebhookPreviousSecret != "" {
			bad("CAIRN_WEBHOOK_PREVIOUS_SECRET", "set, but CAIRN_WEBHOOK_URL is unset: set the URL to deliver webhooks to")
		}
		return
	}
	if err := workflow.ValidateWebhookURL(c.WebhookURL); err != nil {
		bad("CAIRN_WEBHOOK_URL", "%v", err)
		return
	}
	if c.WebhookSecret == "" {
		bad("CAIRN_WEBHOOK_SECRET", "unset: a secret is required to sign webhook deliveries when CAIRN_WEBHOOK_URL is set")
	} else if _, err := webhook.DecodeSecret(c.WebhookSecret); err != nil {
		bad("CAIRN_WEBHOOK_SECRET", "%v (want whsec_ and a base64 key, or a secret without that prefix)", err)
	}
	if c.WebhookPreviousSecret != "" {
		if _, err := webhook.DecodeSecret(c.WebhookPreviousSecret); err != nil {
			bad("CAIRN_WEBHOOK_PREVIOUS_SECRET", "%v (want whsec_ and a base64 key, or a secret without that prefix)", err)
		}
	}
	for _, ev := range c.webhookEvents() {
		if (workflow.WebhookConfig{URL: c.WebhookURL, Secret: "x", Events: []string{ev}}).Validate() != nil {
			bad("CAIRN_WEBHOOK_EVENTS", "%q: want comma-separated notification types like run_failed,run_succeeded", ev)
		}
	}
}

// Webhook returns the webhook configuration, or nil when CAIRN_WEBHOOK_URL
// is unset.
func (c Config) Webhook() *workflow.WebhookConfig {
	if c.WebhookURL == "" {
		return nil
	}
	w := &workflow.WebhookConfig{URL: c.WebhookURL, Secret: c.WebhookSecret, Events: c.webhookEvents()}
	if c.WebhookPreviousSecret != "" {
		w.PreviousSecrets = []string{c.WebhookPreviousSecret}
	}
	return w
}

// webhookEvents splits CAIRN_WEBHOOK_EVENTS.
func (c Config) webhookEvents() []string {
	var out []string
	for ev := range strings.SplitSeq(c.WebhookEvents, ",") {
		if ev = strings.TrimSpace(ev); ev != "" {
			out = append(out, ev)
		}
	}
	return out
}

// validateHTTP checks CAIRN_HTTP_ADDR. Whether an address without tokens is
// allowed (loopback only) is the dashboard's check, at start.
func (c Config) validateHTTP(bad func(v, format string, args ...any)) {
	if c.HTTPAddr == "" {
		return
	}
	_, port, err := net.SplitHostPort(c.HTTPAddr)
	if err != nil {
		bad("CAIRN_HTTP_ADDR", "%q: want host:port, like 127.0.0.1:8080 (%v); empty disables the HTTP API", c.HTTPAddr, err)
		return
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		bad("CAIRN_HTTP_ADDR", "%q: port %q is not a number from 0 to 65535", c.HTTPAddr, port)
	}
}

// MinDashboardSecretLength is the length CAIRN_DASHBOARD_SECRET must have
// at least, in bytes: 32, what `openssl rand -hex 16` prints (`openssl
// rand -hex 32` is better).
const MinDashboardSecretLength = 32

// minSecretDistinct is how many different bytes a secret must hold at
// least: a string of one character repeated, or a short pattern, is long
// but not secret.
const minSecretDistinct = 8

// Secret is a configured secret. It prints as "[redacted]" (fmt, slog),
// so that logging a Config does not reveal it; string(s) is its value.
type Secret string

// String returns "[redacted]" for a set secret and "" for an unset one.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "[redacted]"
}

// GoString is String, for %#v.
func (s Secret) GoString() string { return s.String() }

// LogValue is String, for log/slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// validateDashboardSecret checks CAIRN_DASHBOARD_SECRET: unset, or long
// and varied enough to be a random secret. The messages never quote it.
func (c Config) validateDashboardSecret(bad func(v, format string, args ...any)) {
	const v = "CAIRN_DASHBOARD_SECRET"
	const hint = "generate one with: openssl rand -hex 32"
	s := string(c.DashboardSecret)
	if s == "" {
		return
	}
	distinct := map[byte]bool{}
	for i := range len(s) {
		distinct[s[i]] = true
	}
	switch {
	case len(s) < MinDashboardSecretLength:
		bad(v, "too short (%d bytes): want at least %d random bytes; %s", len(s), MinDashboardSecretLength, hint)
	case len(distinct) < minSecretDistinct:
		bad(v, "too weak (%d distinct characters): want a random secret; %s", len(distinct), hint)
	case strings.TrimSpace(s) != s:
		bad(v, "starts or ends with white space: remove it (replicas must agree on every byte)")
	}
}
