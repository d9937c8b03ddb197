package config_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/cmd/internal/config"
	"github.com/cairnhq/cairn/workflow"
)

// vars returns the names of the variables err is about, from every
// *config.Error in its tree.
func vars(err error) []string {
	var out []string
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		// Every *config.Error in the tree, not errors.As's first one.
		if e, ok := err.(*config.Error); ok { //nolint:errorlint // the walk unwraps itself
			out = append(out, e.Var)
			return
		}
		switch u := err.(type) { //nolint:errorlint // the walk unwraps itself
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	return out
}

// allVars returns the variable names of Config's env tags.
func allVars() []string {
	var out []string
	typ := reflect.TypeFor[config.Config]()
	for f := range typ.Fields() {
		if v := f.Tag.Get("env"); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func TestLoadDefaults(t *testing.T) {
	t.Parallel()
	for _, environ := range [][]string{
		nil,
		{"PATH=/bin", "HOME=/root", "NOT_A_PAIR", "CAIRN_OTHER=1"},
		// Set but empty takes the default too.
		{"CAIRN_QUEUE=", "CAIRN_CONCURRENCY=", "CAIRN_RETRY_JITTER=", "CAIRN_STEP_TIMEOUT="},
	} {
		c, err := config.Load(environ)
		if err != nil {
			t.Fatalf("Load(%q) = %v", environ, err)
		}
		want := config.Config{
			RedisURL:                 "",
			RedisMinReplicasTimeout:  time.Second,
			EmbeddedAddr:             "127.0.0.1:6390",
			Queue:                    "workflows",
			Concurrency:              10,
			LogLevel:                 "info",
			LogFormat:                "text",
			RetryMaxAttempts:         4,
			RetryInitialInterval:     time.Second,
			RetryBackoff:             "exponential",
			RetryBackoffCoefficient:  2,
			RetryMaxInterval:         30 * time.Second,
			RetryJitter:              "equal",
			UnknownErrors:            "transient",
			StepTimeout:              15 * time.Minute,
			RunTimeout:               0,
			MaxIterations:            0,
			MaxCrashes:               3,
			Retention:                7 * 24 * time.Hour,
			TaskCheckInterval:        20 * time.Millisecond,
			DelayedTaskCheckInterval: 200 * time.Millisecond,
			ShutdownTimeout:          30 * time.Second,
			ReconcileInterval:        30 * time.Second,
			RecoveryConcurrency:      5,
			MaxAutoRecoveries:        3,
			FenceTTL:                 3 * time.Second,
			SweepInterval:            500 * time.Millisecond,
			HTTPStepMaxBody:          1 << 20,
			HTTPAddr:                 "127.0.0.1:8080",
		}
		if c != want {
			t.Errorf("Load(%q) =\n%+v\nwant\n%+v", environ, c, want)
		}
		if c.EmbeddedAddr != config.DefaultEmbeddedAddr {
			t.Errorf("default EmbeddedAddr %q, DefaultEmbeddedAddr %q", c.EmbeddedAddr, config.DefaultEmbeddedAddr)
		}
	}
}

// TestDefaultsMatchTags checks every field against its envDefault tag, so
// the tags (from which the table of docs/configuration.md is generated) say
// what Load does.
func TestDefaultsMatchTags(t *testing.T) {
	t.Parallel()
	c, err := config.Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	v := reflect.ValueOf(c)
	typ := v.Type()
	for i := range typ.NumField() {
		f := typ.Field(i)
		tag, ok := f.Tag.Lookup("envDefault")
		got := v.Field(i).Interface()
		if !ok {
			if !v.Field(i).IsZero() {
				t.Errorf("%s has no default but loads as %v", f.Name, got)
			}
			continue
		}
		var want any
		var perr error
		switch got.(type) {
		case time.Duration:
			want, perr = time.ParseDuration(tag)
		case int:
			want, perr = strconv.Atoi(tag)
		case float64:
			want, perr = strconv.ParseFloat(tag, 64)
		case bool:
			want, perr = strconv.ParseBool(tag)
		case string:
			want = tag
		default:
			t.Fatalf("%s: unhandled type %T", f.Name, got)
		}
		if perr != nil {
			t.Errorf("%s: envDefault %q does not parse: %v", f.Name, tag, perr)
		} else if got != want {
			t.Errorf("%s (%s) = %v, envDefault says %q", f.Name, f.Tag.Get("env"), got, tag)
		}
	}
}

func TestDefaultPolicyAgreesWithWorkflow(t *testing.T) {
	t.Parallel()
	c, err := config.Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Policy(), workflow.DefaultPolicy(); !got.Equal(want) {
		t.Errorf("default configuration's Policy() = %+v, workflow.DefaultPolicy() = %+v", got, want)
	}
}

func TestLoadOverrides(t *testing.T) {
	t.Parallel()
	c, err := config.Load([]string{
		"CAIRN_REDIS_URL=rediss://user:pa=ss@redis.internal:6380/2",
		"CAIRN_EMBEDDED_ADDR=127.0.0.1:7000",
		"CAIRN_QUEUE=billing",
		"CAIRN_CONCURRENCY=64",
		"CAIRN_LOG_LEVEL=debug",
		"CAIRN_LOG_FORMAT=json",
		"CAIRN_RETRY_MAX_ATTEMPTS=9",
		"CAIRN_RETRY_INITIAL_INTERVAL=250ms",
		"CAIRN_RETRY_BACKOFF_COEFFICIENT=1.5",
		"CAIRN_RETRY_MAX_INTERVAL=2m",
		"CAIRN_RETRY_JITTER=full",
		"CAIRN_UNKNOWN_ERRORS=permanent",
		"CAIRN_STEP_TIMEOUT=90s",
		"CAIRN_RUN_TIMEOUT=48h",
		"CAIRN_MAX_ITERATIONS=500",
		"CAIRN_MAX_CRASHES=1",
		"CAIRN_RETENTION=24h",
		"CAIRN_TASK_CHECK_INTERVAL=5ms",
		"CAIRN_DELAYED_TASK_CHECK_INTERVAL=1s",
		"CAIRN_SHUTDOWN_TIMEOUT=1m",
		"CAIRN_RECONCILE_INTERVAL=5m",
		"CAIRN_RECOVERY_CONCURRENCY=20",
		"CAIRN_MAX_AUTO_RECOVERIES=7",
		"CAIRN_FENCE_TTL=300ms",
		"CAIRN_SWEEP_INTERVAL=500ms",
		"CAIRN_RETRY_BACKOFF=linear",
		"CAIRN_WORKFLOWS_FILE=/etc/cairn/workflows.yaml",
		"CAIRN_HTTP_STEP_MAX_BODY=4096",
		"CAIRN_HTTP_ADDR=0.0.0.0:9090",
		"CAIRN_API_TOKENS_FILE=/etc/cairn/tokens",
		"CAIRN_MONITORING_WRITE=true",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := config.Config{
		RedisURL: "rediss://user:pa=ss@redis.internal:6380/2", RedisMinReplicasTimeout: time.Second,
		EmbeddedAddr: "127.0.0.1:7000", Queue: "billing",
		Concurrency: 64, LogLevel: "debug", LogFormat: "json", RetryMaxAttempts: 9,
		RetryInitialInterval: 250 * time.Millisecond, RetryBackoffCoefficient: 1.5, RetryMaxInterval: 2 * time.Minute,
		RetryJitter: "full", UnknownErrors: "permanent", StepTimeout: 90 * time.Second, RunTimeout: 48 * time.Hour,
		MaxIterations: 500, MaxCrashes: 1, Retention: 24 * time.Hour, TaskCheckInterval: 5 * time.Millisecond,
		DelayedTaskCheckInterval: time.Second, ShutdownTimeout: time.Minute, ReconcileInterval: 5 * time.Minute,
		RecoveryConcurrency: 20, MaxAutoRecoveries: 7, FenceTTL: 300 * time.Millisecond, SweepInterval: 500 * time.Millisecond,
		RetryBackoff: "linear", WorkflowsFile: "/etc/cairn/workflows.yaml", HTTPStepMaxBody: 4096,
		HTTPAddr: "0.0.0.0:9090", HTTPAddrSet: true, APITokensFile: "/etc/cairn/tokens", MonitoringWrite: true,
	}
	if c != want {
		t.Fatalf("Load =\n%+v\nwant\n%+v", c, want)
	}

	wantPolicy := workflow.Policy{
		MaxAttempts: 9, InitialInterval: 250 * time.Millisecond, Backoff: workflow.BackoffLinear,
		BackoffCoefficient: 1.5, MaxInterval: 2 * time.Minute,
		Jitter: workflow.JitterFull, UnknownErrors: workflow.UnknownPermanent, StepTimeout: 90 * time.Second,
		RunTimeout: 48 * time.Hour, MaxIterations: 500, MaxCrashes: 1,
	}
	if p := c.Policy(); !p.Equal(wantPolicy) {
		t.Errorf("Policy() =\n%+v\nwant\n%+v", p, wantPolicy)
	}
	if err := c.Policy().Validate(); err != nil {
		t.Errorf("Policy().Validate() = %v", err)
	}

	if c.Embedded() {
		t.Error("Embedded() = true with CAIRN_REDIS_URL set")
	}
	if got := c.EffectiveRedisURL(); got != want.RedisURL {
		t.Errorf("EffectiveRedisURL() = %q, want CAIRN_REDIS_URL", got)
	}
	target, err := c.Redis()
	if err != nil {
		t.Fatal(err)
	}
	if opts := target.Single; opts == nil || opts.Addr != "redis.internal:6380" || opts.DB != 2 || opts.Username != "user" ||
		opts.Password != "pa=ss" || opts.TLSConfig == nil {
		t.Errorf("Redis() = %+v", opts)
	}
	if l, err := c.SlogLevel(); err != nil || l != slog.LevelDebug {
		t.Errorf("SlogLevel() = %v, %v", l, err)
	}
}

func TestEmbeddedRedisURL(t *testing.T) {
	t.Parallel()
	c, err := config.Load([]string{"CAIRN_EMBEDDED_ADDR=127.0.0.1:16390"})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Embedded() {
		t.Error("Embedded() = false without CAIRN_REDIS_URL")
	}
	if got := c.EffectiveRedisURL(); got != "redis://127.0.0.1:16390" {
		t.Errorf("EffectiveRedisURL() = %q, want the embedded store's", got)
	}
	target, err := c.Redis()
	if err != nil || target.Single == nil || target.Single.Addr != "127.0.0.1:16390" || target.Single.DB != 0 {
		t.Errorf("Redis() = %+v, %v", target, err)
	}
}

func TestLoadRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		variable, value string
		msg             string // part of the message
	}{
		{"CAIRN_REDIS_URL", "http://localhost:6379", "scheme"},
		{"CAIRN_REDIS_URL", "localhost:6379", "scheme"},
		{"CAIRN_REDIS_URL", "redis://", "no host"},
		{"CAIRN_REDIS_URL", "redis://%zz", "not a URL"},
		{"CAIRN_REDIS_URL", "redis://host:port", "not a URL"},
		{"CAIRN_REDIS_URL", "redis-sentinel://h:26379", "master"},
		{"CAIRN_REDIS_URL", "redis-cluster://h:1/3", "only database 0"},
		{"CAIRN_REDIS_MIN_REPLICAS", "-1", "0 (do not wait) to 100"},
		{"CAIRN_REDIS_MIN_REPLICAS", "1", "CAIRN_REDIS_URL is unset"},
		{"CAIRN_REDIS_MIN_REPLICAS", "one", "integer"},
		{"CAIRN_REDIS_MIN_REPLICAS_TIMEOUT", "0s", "at least 1ms"},
		{"CAIRN_REDIS_MIN_REPLICAS_TIMEOUT", "1", "duration"},
		{"CAIRN_QUEUE", "a{b}", "braces"},
		{"CAIRN_QUEUE", "a:b", "colons"},
		{"CAIRN_QUEUE", "a b", "spaces"},
		{"CAIRN_CONCURRENCY", "abc", "cannot parse as an integer"},
		{"CAIRN_CONCURRENCY", "1.5", "cannot parse as an integer"},
		{"CAIRN_CONCURRENCY", "0", "1 to 10000"},
		{"CAIRN_CONCURRENCY", "-4", "1 to 10000"},
		{"CAIRN_CONCURRENCY", "10001", "1 to 10000"},
		{"CAIRN_LOG_LEVEL", "verbose", "debug, info, warn or error"},
		{"CAIRN_LOG_FORMAT", "yaml", "text or json"},
		{"CAIRN_RETRY_MAX_ATTEMPTS", "many", "integer"},
		{"CAIRN_RETRY_MAX_ATTEMPTS", "0", "at least 1"},
		{"CAIRN_RETRY_INITIAL_INTERVAL", "1", "duration"},
		{"CAIRN_RETRY_INITIAL_INTERVAL", "0s", "positive"},
		{"CAIRN_RETRY_INITIAL_INTERVAL", "-1s", "positive"},
		{"CAIRN_RETRY_BACKOFF_COEFFICIENT", "double", "number"},
		{"CAIRN_RETRY_BACKOFF_COEFFICIENT", "0.5", "at least 1"},
		{"CAIRN_RETRY_MAX_INTERVAL", "soon", "duration"},
		{"CAIRN_RETRY_MAX_INTERVAL", "500ms", "CAIRN_RETRY_INITIAL_INTERVAL"},
		{"CAIRN_RETRY_JITTER", "sometimes", "none, full or equal"},
		{"CAIRN_RETRY_BACKOFF", "quadratic", "exponential, linear or fixed"},
		{"CAIRN_OUTBOX", "/", "is a directory"},
		{"CAIRN_OUTBOX", "/no-such-dir-of-cairn/outbox.db", "does not exist"},
		{"CAIRN_HTTP_STEP_MAX_BODY", "0", "at least 1"},
		{"CAIRN_HTTP_STEP_MAX_BODY", "1MiB", "integer"},
		{"CAIRN_RETRY_JITTER", "fully", "none, full or equal"},
		{"CAIRN_DEMO_CHAOS", "maybe", "true or false"},
		{"CAIRN_DEMO", "yes", "true or false"},
		{"CAIRN_EMBEDDED_ADDR", "0.0.0.0:6390", "loopback"},
		{"CAIRN_EMBEDDED_ADDR", "nohostport", "host:port"},
		{"CAIRN_UNKNOWN_ERRORS", "maybe", "transient or permanent"},
		{"CAIRN_STEP_TIMEOUT", "15", "duration"},
		{"CAIRN_STEP_TIMEOUT", "0s", "positive"},
		{"CAIRN_RUN_TIMEOUT", "1d", "duration"},
		{"CAIRN_RUN_TIMEOUT", "-1h", "zero or more"},
		{"CAIRN_MAX_ITERATIONS", "lots", "integer"},
		{"CAIRN_MAX_ITERATIONS", "-1", "0 (no limit) or more"},
		{"CAIRN_MAX_CRASHES", "x", "integer"},
		{"CAIRN_MAX_CRASHES", "0", "at least 1"},
		{"CAIRN_RETENTION", "7d", "duration"},
		{"CAIRN_RETENTION", "0s", "positive"},
		{"CAIRN_TASK_CHECK_INTERVAL", "fast", "duration"},
		{"CAIRN_TASK_CHECK_INTERVAL", "0s", "positive"},
		{"CAIRN_DELAYED_TASK_CHECK_INTERVAL", "x", "duration"},
		{"CAIRN_DELAYED_TASK_CHECK_INTERVAL", "-1ms", "positive"},
		{"CAIRN_SHUTDOWN_TIMEOUT", "x", "duration"},
		{"CAIRN_SHUTDOWN_TIMEOUT", "0s", "positive"},
		{"CAIRN_RECONCILE_INTERVAL", "often", "duration"},
		{"CAIRN_RECONCILE_INTERVAL", "0s", "positive"},
		{"CAIRN_RECOVERY_CONCURRENCY", "x", "integer"},
		{"CAIRN_RECOVERY_CONCURRENCY", "0", "1 to 1000"},
		{"CAIRN_RECOVERY_CONCURRENCY", "1001", "1 to 1000"},
		{"CAIRN_MAX_AUTO_RECOVERIES", "x", "integer"},
		{"CAIRN_MAX_AUTO_RECOVERIES", "0", "at least 1"},
		{"CAIRN_FENCE_TTL", "10", "duration"},
		{"CAIRN_FENCE_TTL", "299ms", "at least 300ms"},
		{"CAIRN_SWEEP_INTERVAL", "x", "duration"},
		{"CAIRN_SWEEP_INTERVAL", "-2s", "positive"},
		{"CAIRN_WEBHOOK_URL", "ftp://hooks.example.com/cairn", "http:// or https://"},
		{"CAIRN_WEBHOOK_URL", "https://", "no host"},
		{"CAIRN_WEBHOOK_URL", "hooks.example.com/cairn", "http:// or https://"},
		{"CAIRN_WEBHOOK_SECRET", "s3cret", "CAIRN_WEBHOOK_URL is unset"},
		{"CAIRN_WEBHOOK_EVENTS", "run_failed", "CAIRN_WEBHOOK_URL is unset"},
		{"CAIRN_WEBHOOK_PREVIOUS_SECRET", "s3cret", "CAIRN_WEBHOOK_URL is unset"},
		{"CAIRN_HTTP_ADDR", "8080", "host:port"},
		{"CAIRN_HTTP_ADDR", "127.0.0.1:http", "port"},
		{"CAIRN_MONITORING_WRITE", "maybe", "true or false"},
		{"CAIRN_DASHBOARD_SECRET", "s3cret", "too short"}, // more in secret_test.go
	}

	// Every variable with a rule is covered. CAIRN_EMBEDDED_ADDR has none;
	// CAIRN_WORKFLOWS_FILE and CAIRN_API_TOKENS_FILE are read (and
	// checked) by the worker at start.
	for _, v := range allVars() {
		if v != "CAIRN_EMBEDDED_ADDR" && v != "CAIRN_WORKFLOWS_FILE" && v != "CAIRN_API_TOKENS_FILE" && !slices.ContainsFunc(tests, func(tt struct{ variable, value, msg string }) bool {
			return tt.variable == v
		}) {
			t.Errorf("no invalid value of %s is tested", v)
		}
	}

	for _, tt := range tests {
		t.Run(tt.variable+"="+tt.value, func(t *testing.T) {
			t.Parallel()
			_, err := config.Load([]string{tt.variable + "=" + tt.value})
			if err == nil {
				t.Fatalf("Load accepted %s=%s", tt.variable, tt.value)
			}
			if got := vars(err); !slices.Equal(got, []string{tt.variable}) {
				t.Errorf("error names %q, want just %s: %v", got, tt.variable, err)
			}
			if !strings.HasPrefix(err.Error(), tt.variable+": ") {
				t.Errorf("message %q does not start with the variable", err)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("message %q does not contain %q", err, tt.msg)
			}
		})
	}
}

// TestLoadRejectsNonFiniteCoefficient exposes a bug: strconv.ParseFloat
// accepts "NaN" and "Inf", config.Validate's `< 1` check lets both through,
// and the worker then fails later in workflow.NewEngine ("global policy:
// invalid policy: backoff_coefficient ...") with exit code 1 and an error
// that does not name the variable.
func TestLoadRejectsNonFiniteCoefficient(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"NaN", "Inf", "+Inf"} {
		c, err := config.Load([]string{"CAIRN_RETRY_BACKOFF_COEFFICIENT=" + v})
		if !slices.Contains(vars(err), "CAIRN_RETRY_BACKOFF_COEFFICIENT") {
			t.Errorf("Load(CAIRN_RETRY_BACKOFF_COEFFICIENT=%s) = %v; its Policy().Validate() = %v", v, err, c.Policy().Validate())
		}
	}
}

func TestLoadReportsAllErrorsTogether(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		environ []string
		want    []string
	}{
		{"parse errors", []string{"CAIRN_CONCURRENCY=abc", "CAIRN_STEP_TIMEOUT=forever", "CAIRN_RETRY_BACKOFF_COEFFICIENT=x"},
			[]string{"CAIRN_CONCURRENCY", "CAIRN_RETRY_BACKOFF_COEFFICIENT", "CAIRN_STEP_TIMEOUT"}},
		{"validation errors", []string{"CAIRN_RETRY_JITTER=sometimes", "CAIRN_LOG_FORMAT=xml", "CAIRN_MAX_CRASHES=0",
			"CAIRN_REDIS_URL=http://x"},
			[]string{"CAIRN_LOG_FORMAT", "CAIRN_MAX_CRASHES", "CAIRN_REDIS_URL", "CAIRN_RETRY_JITTER"}},
		{"parse and validation errors", []string{"CAIRN_CONCURRENCY=abc", "CAIRN_RETRY_JITTER=sometimes"},
			[]string{"CAIRN_CONCURRENCY", "CAIRN_RETRY_JITTER"}},
	}
	for _, tt := range tests {
		_, err := config.Load(tt.environ)
		got := vars(err)
		slices.Sort(got)
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: error names %q, want %q:\n%v", tt.name, got, tt.want, err)
		}
		// One line per variable.
		if n := strings.Count(err.Error(), "\n") + 1; n != len(tt.want) {
			t.Errorf("%s: %d lines, want %d:\n%v", tt.name, n, len(tt.want), err)
		}
	}
}

// TestAcceptedConfigHasValidPolicy: whatever Load accepts, the worker's
// engine accepts as its global policy.
func TestAcceptedConfigHasValidPolicy(t *testing.T) {
	t.Parallel()
	for _, environ := range [][]string{
		nil,
		{"CAIRN_RETRY_BACKOFF_COEFFICIENT=1", "CAIRN_RETRY_MAX_INTERVAL=1s"},
		{"CAIRN_RETRY_INITIAL_INTERVAL=1ns", "CAIRN_RETRY_MAX_INTERVAL=1ns", "CAIRN_RETRY_JITTER=none"},
		{"CAIRN_RETRY_MAX_ATTEMPTS=1", "CAIRN_MAX_ITERATIONS=1", "CAIRN_RUN_TIMEOUT=1ns"},
	} {
		c, err := config.Load(environ)
		if err != nil {
			t.Fatalf("Load(%q) = %v", environ, err)
		}
		if err := c.Policy().Validate(); err != nil {
			t.Errorf("Load(%q) accepted, but Policy().Validate() = %v", environ, err)
		}
	}
}

func TestSlogLevel(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]slog.Level{
		"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError,
		"DEBUG": slog.LevelDebug,
	} {
		c, err := config.Load([]string{"CAIRN_LOG_LEVEL=" + in})
		if err != nil {
			t.Fatalf("Load(CAIRN_LOG_LEVEL=%s) = %v", in, err)
		}
		if got, err := c.SlogLevel(); err != nil || got != want {
			t.Errorf("SlogLevel() for %q = %v, %v; want %v", in, got, err, want)
		}
	}
}

func TestLogger(t *testing.T) {
	t.Parallel()
	t.Run("json", func(t *testing.T) {
		t.Parallel()
		c, err := config.Load([]string{"CAIRN_LOG_FORMAT=json"})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		c.Logger(&buf).Info("worker started", "queue", "q1", "concurrency", 3)
		var rec map[string]any
		if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
			t.Fatalf("json logger wrote %q: %v", buf.String(), err)
		}
		if rec["msg"] != "worker started" || rec["level"] != "INFO" || rec["queue"] != "q1" || rec["concurrency"] != 3.0 {
			t.Errorf("json record %v", rec)
		}
		if _, ok := rec["time"]; !ok {
			t.Errorf("json record has no time: %v", rec)
		}
	})
	t.Run("text", func(t *testing.T) {
		t.Parallel()
		c, err := config.Load(nil)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		c.Logger(&buf).Info("worker started", "queue", "q1")
		line := buf.String()
		if !strings.HasPrefix(line, "time=") || !strings.Contains(line, ` level=INFO msg="worker started" queue=q1`) ||
			!strings.HasSuffix(line, "\n") || strings.Count(line, "\n") != 1 {
			t.Errorf("text logger wrote %q", line)
		}
		if json.Valid(buf.Bytes()) {
			t.Errorf("text logger wrote JSON: %q", line)
		}
	})
	t.Run("levels", func(t *testing.T) {
		t.Parallel()
		for _, tt := range []struct {
			level string
			want  []string // of debug, info, warn, error
		}{
			{"debug", []string{"debug", "info", "warn", "error"}},
			{"info", []string{"info", "warn", "error"}},
			{"warn", []string{"warn", "error"}},
			{"error", []string{"error"}},
		} {
			c, err := config.Load([]string{"CAIRN_LOG_LEVEL=" + tt.level, "CAIRN_LOG_FORMAT=json"})
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			log := c.Logger(&buf)
			log.Debug("debug")
			log.Info("info")
			log.Warn("warn")
			log.Error("error")
			var got []string
			dec := json.NewDecoder(&buf)
			for dec.More() {
				var rec struct {
					Msg string `json:"msg"`
				}
				if err := dec.Decode(&rec); err != nil {
					t.Fatal(err)
				}
				got = append(got, rec.Msg)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("level %s logged %q, want %q", tt.level, got, tt.want)
			}
		}
	})
}

func TestErrorMessage(t *testing.T) {
	t.Parallel()
	e := &config.Error{Var: "CAIRN_X", Msg: "bad"}
	if got := e.Error(); got != "CAIRN_X: bad" {
		t.Errorf("Error() = %q", got)
	}
	if got := fmt.Sprint(error(e)); got != "CAIRN_X: bad" {
		t.Errorf("Sprint = %q", got)
	}
}

func TestEnumsAreCaseInsensitive(t *testing.T) {
	t.Parallel()
	c, err := config.Load([]string{"CAIRN_LOG_FORMAT=JSON", "CAIRN_RETRY_JITTER=Full", "CAIRN_UNKNOWN_ERRORS=PERMANENT", "CAIRN_LOG_LEVEL=DEBUG"})
	if err != nil {
		t.Fatal(err)
	}
	p := c.Policy()
	if p.Jitter != workflow.JitterFull || p.UnknownErrors != workflow.UnknownPermanent {
		t.Errorf("policy %+v", p)
	}
	var buf bytes.Buffer
	c.Logger(&buf).Info("hello")
	if !strings.HasPrefix(buf.String(), "{") {
		t.Errorf("CAIRN_LOG_FORMAT=JSON logged %q", buf.String())
	}
}

func TestWebhookConfig(t *testing.T) {
	t.Parallel()
	c, err := config.Load(nil)
	if err != nil || c.Webhook() != nil {
		t.Fatalf("no webhook variables: webhook %+v, %v; want none", c.Webhook(), err)
	}

	_, err = config.Load([]string{"CAIRN_WEBHOOK_URL=https://hooks.example.com/cairn"})
	if got := vars(err); !slices.Equal(got, []string{"CAIRN_WEBHOOK_SECRET"}) || !strings.Contains(err.Error(), "required") {
		t.Errorf("URL without a secret: %v (vars %q); want CAIRN_WEBHOOK_SECRET required", err, got)
	}

	_, err = config.Load([]string{"CAIRN_WEBHOOK_URL=https://hooks.example.com/cairn", "CAIRN_WEBHOOK_SECRET=s",
		"CAIRN_WEBHOOK_EVENTS=run_failed,Run Failed"})
	if got := vars(err); !slices.Equal(got, []string{"CAIRN_WEBHOOK_EVENTS"}) || !strings.Contains(err.Error(), `"Run Failed"`) {
		t.Errorf("bad event name: %v (vars %q); want CAIRN_WEBHOOK_EVENTS naming it", err, got)
	}

	c, err = config.Load([]string{"CAIRN_WEBHOOK_URL=http://127.0.0.1:9000/hook?x=1", "CAIRN_WEBHOOK_SECRET=s3cret",
		"CAIRN_WEBHOOK_EVENTS= run_failed , run_succeeded,"})
	if err != nil {
		t.Fatal(err)
	}
	w := c.Webhook()
	if w == nil || w.URL != "http://127.0.0.1:9000/hook?x=1" || w.Secret != "s3cret" ||
		!slices.Equal(w.Events, []string{"run_failed", "run_succeeded"}) {
		t.Fatalf("Webhook() = %+v", w)
	}
	if err := w.Validate(); err != nil {
		t.Errorf("the webhook config of an accepted environment is invalid: %v", err)
	}
	c, err = config.Load([]string{"CAIRN_WEBHOOK_URL=https://hooks.example.com/cairn", "CAIRN_WEBHOOK_SECRET=s"})
	if err != nil || c.Webhook() == nil || c.Webhook().Events != nil || c.Webhook().PreviousSecrets != nil {
		t.Errorf("no CAIRN_WEBHOOK_EVENTS: %+v, %v; want the default events (nil) and no previous secret", c.Webhook(), err)
	}

	// Standard Webhooks secrets (whsec_ and base64), and a previous secret
	// during a rotation.
	c, err = config.Load([]string{"CAIRN_WEBHOOK_URL=https://hooks.example.com/cairn",
		"CAIRN_WEBHOOK_SECRET=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "CAIRN_WEBHOOK_PREVIOUS_SECRET=s3cret"})
	if err != nil || c.Webhook() == nil || c.Webhook().Secret != "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" ||
		!slices.Equal(c.Webhook().PreviousSecrets, []string{"s3cret"}) || c.Webhook().Validate() != nil {
		t.Errorf("whsec_ secret and a previous one: %+v, %v", c.Webhook(), err)
	}
	for _, env := range [][]string{
		{"CAIRN_WEBHOOK_SECRET=whsec_not-base64!"},
		{"CAIRN_WEBHOOK_SECRET=s", "CAIRN_WEBHOOK_PREVIOUS_SECRET=whsec_"},
	} {
		_, err = config.Load(append([]string{"CAIRN_WEBHOOK_URL=https://hooks.example.com/cairn"}, env...))
		name, _, _ := strings.Cut(env[len(env)-1], "=")
		if got := vars(err); !slices.Equal(got, []string{name}) || !strings.Contains(err.Error(), "base64") {
			t.Errorf("%q: %v (vars %q); want %s not base64", env, err, got, name)
		}
	}
}

// TestHTTPAddrEmptyDisables: unlike the other variables, CAIRN_HTTP_ADDR set
// but empty is not its default: it turns the HTTP API off. HTTPAddrSet
// tells an address the operator set from the default.
func TestHTTPAddrEmptyDisables(t *testing.T) {
	t.Parallel()
	for environ, want := range map[string]string{"": "127.0.0.1:8080", "CAIRN_HTTP_ADDR=": "", "CAIRN_HTTP_ADDR=[::1]:80": "[::1]:80",
		"CAIRN_HTTP_ADDR=127.0.0.1:8080": "127.0.0.1:8080"} {
		c, err := config.Load(strings.Fields(environ))
		if err != nil || c.HTTPAddr != want || c.HTTPAddrSet != (environ != "") {
			t.Errorf("Load(%q): HTTPAddr %q, set %v, %v; want %q, set %v", environ, c.HTTPAddr, c.HTTPAddrSet, err, want,
				environ != "")
		}
	}
}

// TestRegistersDemo: the demo workflow is the embedded store's (make run);
// a worker on Redis registers it only when CAIRN_DEMO or CAIRN_DEMO_CHAOS
// asks for it.
func TestRegistersDemo(t *testing.T) {
	t.Parallel()
	const onRedis = "CAIRN_REDIS_URL=redis://127.0.0.1:6379/0"
	for _, tc := range []struct {
		environ []string
		want    bool
	}{
		{nil, true},
		{[]string{"CAIRN_DEMO=false"}, true}, // the embedded store always has it
		{[]string{onRedis}, false},
		{[]string{onRedis, "CAIRN_DEMO="}, false},
		{[]string{onRedis, "CAIRN_DEMO=false"}, false},
		{[]string{onRedis, "CAIRN_DEMO=true"}, true},
		{[]string{onRedis, "CAIRN_DEMO=1"}, true},
		{[]string{onRedis, "CAIRN_DEMO_CHAOS=true"}, true},
	} {
		c, err := config.Load(tc.environ)
		if err != nil {
			t.Fatalf("Load(%q): %v", tc.environ, err)
		}
		if got := c.RegistersDemo(); got != tc.want {
			t.Errorf("Load(%q).RegistersDemo() = %v, want %v", tc.environ, got, tc.want)
		}
	}
}
