package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/cairnhq/cairn/dashboard"
	"github.com/cairnhq/cairn/internal/proctest"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// The tests of docker-compose.yml and the Dockerfile. No machine of the
// project's can build or pull images, so what the files say is checked
// statically (TestComposeFile, TestDockerfile), and what the containers
// would run is run as processes (TestComposeServicesStart): the worker and
// the dashboard binaries with exactly the environment and arguments the
// compose file gives them, the compose network's addresses replaced by the
// test's. CI also checks the file with docker-compose itself (.ci/run).

// composeSecret is CAIRN_DASHBOARD_SECRET in these tests, as an operator
// would set it for `docker compose up`.
const composeSecret = "5d41402abc4b2a76b9719d911017c592aa8b3c6f2d1e0f94e7b1c4a8d6e2f031"

// Tokens of the tests' tokens file.
const (
	composeUserToken  = "compose-user-token-0001"
	composeAdminToken = "compose-admin-token-001"
)

// composeFile is what the tests read of docker-compose.yml.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
	Secrets  map[string]struct {
		File string `yaml:"file"`
	} `yaml:"secrets"`
}

type composeService struct {
	Image         string         `yaml:"image"`
	Build         any            `yaml:"build"`
	Command       composeCommand `yaml:"command"`
	Entrypoint    any            `yaml:"entrypoint"`
	Environment   composeEnv     `yaml:"environment"`
	EnvFile       any            `yaml:"env_file"`
	Ports         []string       `yaml:"ports"`
	Volumes       []string       `yaml:"volumes"`
	Secrets       []composeRef   `yaml:"secrets"`
	ContainerName string         `yaml:"container_name"`
	DependsOn     map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Healthcheck struct {
		Test    []string `yaml:"test"`
		Timeout string   `yaml:"timeout"`
	} `yaml:"healthcheck"`
	StopGracePeriod string `yaml:"stop_grace_period"`
}

// composeEnv is a service's environment, in either of compose's forms (a
// map, or a list of NAME=value).
type composeEnv map[string]string

func (e *composeEnv) UnmarshalYAML(n *yaml.Node) error {
	*e = composeEnv{}
	switch n.Kind {
	case yaml.MappingNode:
		var m map[string]*string
		if err := n.Decode(&m); err != nil {
			return err
		}
		for k, v := range m {
			if v == nil {
				return fmt.Errorf("environment: %s has no value: it would come from the host, which the test cannot give", k)
			}
			(*e)[k] = *v
		}
	case yaml.SequenceNode:
		var l []string
		if err := n.Decode(&l); err != nil {
			return err
		}
		for _, kv := range l {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return fmt.Errorf("environment: %s has no value: it would come from the host, which the test cannot give", kv)
			}
			(*e)[k] = v
		}
	default:
		return fmt.Errorf("environment: want a map or a list, line %d", n.Line)
	}
	return nil
}

// composeCommand is a command, as a list or as a string.
type composeCommand []string

func (c *composeCommand) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*c = strings.Fields(n.Value)
		return nil
	}
	var l []string
	err := n.Decode(&l)
	*c = l
	return err
}

// composeRef is a service's reference to a secret: its name, and where it
// is mounted.
type composeRef struct{ Source, Target string }

func (r *composeRef) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		r.Source = n.Value
	} else {
		var long struct{ Source, Target string }
		if err := n.Decode(&long); err != nil {
			return err
		}
		r.Source, r.Target = long.Source, long.Target
	}
	if r.Target == "" {
		r.Target = "/run/secrets/" + r.Source
	} else if !strings.HasPrefix(r.Target, "/") {
		r.Target = "/run/secrets/" + r.Target
	}
	return nil
}

// repoFile is the path of a file at the repository's root.
func repoFile(t *testing.T, name string) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the repository root %s has no go.mod: %v", root, err)
	}
	return filepath.Join(root, name)
}

// loadCompose reads docker-compose.yml, interpolating ${...} with vars
// alone (never the environment the tests run in), as compose would with
// those variables set.
func loadCompose(t *testing.T, vars map[string]string) composeFile {
	t.Helper()
	cf, err := parseCompose(repoFile(t, "docker-compose.yml"), vars)
	if err != nil {
		t.Fatal(err)
	}
	return cf
}

func parseCompose(path string, vars map[string]string) (composeFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return composeFile{}, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return composeFile{}, fmt.Errorf("%s: %w", path, err)
	}
	if err := interpolateNode(&doc, vars); err != nil {
		return composeFile{}, fmt.Errorf("%s: %w", path, err)
	}
	var cf composeFile
	if err := doc.Decode(&cf); err != nil {
		return composeFile{}, fmt.Errorf("%s: %w", path, err)
	}
	return cf, nil
}

// interpolateNode interpolates every string value (not the keys) of a YAML
// tree.
func interpolateNode(n *yaml.Node, vars map[string]string) error {
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, c := range n.Content {
			if err := interpolateNode(c, vars); err != nil {
				return err
			}
		}
	case yaml.MappingNode:
		for i := 1; i < len(n.Content); i += 2 {
			if err := interpolateNode(n.Content[i], vars); err != nil {
				return fmt.Errorf("%s: %w", n.Content[i-1].Value, err)
			}
		}
	case yaml.ScalarNode:
		if n.Tag == "!!str" {
			v, err := interpolate(n.Value, vars)
			if err != nil {
				return err
			}
			n.Value = v
		}
	case yaml.AliasNode: // its anchor is interpolated where it stands
	}
	return nil
}

var composeVarRE = regexp.MustCompile(`\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

// interpolate does compose's variable substitution: $$, $VAR, ${VAR},
// ${VAR:-default}, ${VAR-default}, ${VAR:?error}, ${VAR?error}.
func interpolate(s string, vars map[string]string) (string, error) {
	var errs []error
	out := composeVarRE.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		sub := composeVarRE.FindStringSubmatch(m)
		name, op, arg := sub[1], sub[2], sub[3]
		if name == "" {
			name = sub[4]
		}
		v, set := vars[name]
		switch {
		case op == ":-" && v == "", op == "-" && !set:
			return arg
		case op == ":?" && v == "", op == "?" && !set:
			errs = append(errs, fmt.Errorf("required variable %s is missing a value: %s", name, arg))
		}
		return v
	})
	return out, errors.Join(errs...)
}

// composeRedisArgs are the arguments the compose file's redis service
// gives redis-server.
func composeRedisArgs(t *testing.T, redis composeService) []string {
	t.Helper()
	if len(redis.Command) == 0 || redis.Command[0] != "redis-server" {
		t.Fatalf("redis: command %q, want redis-server and its arguments", redis.Command)
	}
	return redis.Command[1:]
}

// TestComposeFile checks what docker-compose.yml promises: a durable
// Redis on a volume; workers without a host port, so that --scale works,
// whose /metrics the compose network reaches; one dashboard on one port;
// tokens and the CSRF secret wherever there is an HTTP server; health
// checks a distroless image can run.
func TestComposeFile(t *testing.T) {
	t.Parallel()
	if _, err := parseCompose(repoFile(t, "docker-compose.yml"), nil); err == nil ||
		!strings.Contains(err.Error(), "required variable CAIRN_DASHBOARD_SECRET") {
		t.Errorf("without CAIRN_DASHBOARD_SECRET: %v; want compose to refuse to start (${CAIRN_DASHBOARD_SECRET:?...})", err)
	}
	cf := loadCompose(t, map[string]string{"CAIRN_DASHBOARD_SECRET": composeSecret})
	for _, name := range []string{"redis", "worker", "dashboard"} {
		if _, ok := cf.Services[name]; !ok {
			t.Fatalf("no service %q in docker-compose.yml", name)
		}
	}

	redis := cf.Services["redis"]
	if !regexp.MustCompile(`^redis:[0-9]+(\.[0-9]+)*(-[a-z0-9.]+)?$`).MatchString(redis.Image) {
		t.Errorf("redis: image %q, want the official image with its major version pinned (redis:7-alpine)", redis.Image)
	}
	args := strings.Join(composeRedisArgs(t, redis), " ")
	for _, want := range []string{"--appendonly yes", "--maxmemory-policy noeviction"} {
		if !strings.Contains(args, want) {
			t.Errorf("redis: arguments %q lack %q", args, want)
		}
	}
	if !slices.ContainsFunc(redis.Volumes, func(v string) bool {
		src, dst, _ := strings.Cut(v, ":")
		_, named := cf.Volumes[src]
		return named && strings.HasPrefix(dst, "/data")
	}) {
		t.Errorf("redis: volumes %q, want a named volume on /data", redis.Volumes)
	}
	if len(redis.Ports) > 0 {
		t.Errorf("redis: ports %q: Redis has no authentication here; keep it on the compose network", redis.Ports)
	}
	if len(redis.Healthcheck.Test) == 0 {
		t.Error("redis: no healthcheck")
	}

	for _, name := range []string{"worker", "dashboard"} {
		s := cf.Services[name]
		if s.EnvFile != nil || s.Entrypoint != nil {
			t.Errorf("%s: env_file or entrypoint set: TestComposeServicesStart would not run what the container runs", name)
		}
		if s.Build == nil && s.Image == "" {
			t.Errorf("%s: neither build nor image", name)
		}
		if s.DependsOn["redis"].Condition != "service_healthy" {
			t.Errorf("%s: depends_on redis %+v, want condition service_healthy", name, s.DependsOn["redis"])
		}
		env := s.Environment
		if u, err := url.Parse(env["CAIRN_REDIS_URL"]); err != nil || u.Host != "redis:6379" {
			t.Errorf("%s: CAIRN_REDIS_URL %q, want the redis service, redis:6379", name, env["CAIRN_REDIS_URL"])
		}
		host, _, err := net.SplitHostPort(env["CAIRN_HTTP_ADDR"])
		if ip := net.ParseIP(host); err != nil || (host != "" && (ip == nil || !ip.IsUnspecified())) {
			t.Errorf("%s: CAIRN_HTTP_ADDR %q, want every interface (0.0.0.0:PORT), which the compose network reaches", name, env["CAIRN_HTTP_ADDR"])
		}
		if tf := env["CAIRN_API_TOKENS_FILE"]; !slices.ContainsFunc(s.Secrets, func(r composeRef) bool { return r.Target == tf }) {
			t.Errorf("%s: CAIRN_API_TOKENS_FILE %q is not where a secret of the service is mounted (%+v)", name, tf, s.Secrets)
		}
		if env["CAIRN_DASHBOARD_SECRET"] != composeSecret {
			t.Errorf("%s: CAIRN_DASHBOARD_SECRET %q, want ${CAIRN_DASHBOARD_SECRET}", name, env["CAIRN_DASHBOARD_SECRET"])
		}
		if hc := s.Healthcheck.Test; len(hc) < 3 || hc[0] != "CMD" || !slices.Contains(hc[2:], "--healthcheck") {
			t.Errorf("%s: healthcheck %q, want [CMD, the worker binary, --healthcheck] (the image has no shell)", name, hc)
		}
		if s.ContainerName != "" {
			t.Errorf("%s: container_name %q: replicas need names of their own", name, s.ContainerName)
		}
		// A graceful stop needs the shutdown timeout: Docker kills a
		// container still running after stop_grace_period.
		shutdown := 30 * time.Second
		if v := env["CAIRN_SHUTDOWN_TIMEOUT"]; v != "" {
			if shutdown, err = time.ParseDuration(v); err != nil {
				t.Fatalf("%s: CAIRN_SHUTDOWN_TIMEOUT %q: %v", name, v, err)
			}
		}
		if name == "dashboard" {
			shutdown = 10 * time.Second // dashboard.Config.ShutdownTimeout's default
		}
		if grace, err := time.ParseDuration(s.StopGracePeriod); err != nil || grace <= shutdown {
			t.Errorf("%s: stop_grace_period %q, want more than the shutdown timeout %s", name, s.StopGracePeriod, shutdown)
		}
	}
	if w := cf.Services["worker"]; len(w.Ports) > 0 || len(w.Command) > 0 {
		t.Errorf("worker: ports %q, command %q; want neither: a host port would stop --scale worker=3, and the image's entrypoint runs the worker", w.Ports, w.Command)
	}
	d := cf.Services["dashboard"]
	if !slices.Equal(d.Command, []string{"--dashboard-only"}) {
		t.Errorf("dashboard: command %q, want [--dashboard-only]", d.Command)
	}
	_, httpPort, _ := net.SplitHostPort(d.Environment["CAIRN_HTTP_ADDR"])
	if len(d.Ports) != 1 || !strings.HasSuffix(strings.TrimSuffix(d.Ports[0], "/tcp"), ":"+httpPort) {
		t.Errorf("dashboard: ports %q, want one, to the container's port %s (CAIRN_HTTP_ADDR)", d.Ports, httpPort)
	} else if !strings.HasPrefix(d.Ports[0], "127.0.0.1:") {
		t.Errorf("dashboard: port %q is published on every interface by default; want 127.0.0.1 (plain HTTP)", d.Ports[0])
	}
	for name, s := range cf.Secrets {
		if !strings.HasPrefix(s.File, "./deploy/") {
			t.Errorf("secret %s: file %q, want it under ./deploy/, which git and the build context ignore", name, s.File)
		}
	}
	ignored, err := os.ReadFile(repoFile(t, "deploy/.gitignore"))
	if err != nil || !slices.Contains(strings.Fields(string(ignored)), "tokens") {
		t.Errorf("deploy/.gitignore does not ignore the tokens file (%v)", err)
	}
	dockerignore, err := os.ReadFile(repoFile(t, ".dockerignore"))
	if err != nil || !slices.Contains(strings.Fields(string(dockerignore)), "deploy/") {
		t.Errorf(".dockerignore does not keep deploy/ (the tokens) out of the build context (%v)", err)
	}
}

// dockerfile is what the tests read of the Dockerfile: its instructions,
// continuation lines joined, comments dropped.
func dockerfile(t *testing.T) []string {
	t.Helper()
	return dockerfileAt(t, "Dockerfile")
}

// instruction returns the arguments of the last instruction named name
// ("" when there is none).
func instruction(lines []string, name string) string {
	found := ""
	for _, l := range lines {
		if kw, rest, _ := strings.Cut(l, " "); strings.EqualFold(kw, name) {
			found = strings.TrimSpace(rest)
		}
	}
	return found
}

// dockerEntrypoint is the Dockerfile's ENTRYPOINT, in exec form.
func dockerEntrypoint(t *testing.T) []string {
	t.Helper()
	var ep []string
	if err := json.Unmarshal([]byte(instruction(dockerfile(t), "ENTRYPOINT")), &ep); err != nil || len(ep) == 0 {
		t.Fatalf("Dockerfile: ENTRYPOINT %q, want the exec form [\"/path/of/worker\"]: %v", instruction(dockerfile(t), "ENTRYPOINT"), err)
	}
	return ep
}

// TestDockerfile checks what the Dockerfile must keep: the Go toolchain
// of go.mod, static binaries, a user that is not root, the worker as the
// entrypoint that the compose file's health checks name.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	lines := dockerfile(t)
	gomod, err := os.ReadFile(repoFile(t, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go ([0-9]+)\.([0-9]+)(?:\.([0-9]+))?$`).FindStringSubmatch(string(gomod))
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	goArg := "" // ARG GO_VERSION=...; the other ARGs (VERSION) are the build's options
	for _, l := range lines {
		if rest, ok := strings.CutPrefix(l, "ARG GO_VERSION"); ok {
			goArg = "GO_VERSION" + rest
		}
	}
	arg := regexp.MustCompile(`^GO_VERSION=([0-9]+)\.([0-9]+)(?:\.([0-9]+))?$`).FindStringSubmatch(goArg)
	if arg == nil {
		t.Fatalf("Dockerfile: ARG %q, want GO_VERSION=MAJOR.MINOR.PATCH", goArg)
	}
	num := func(s string) int { n, _ := strconv.Atoi(s); return n }
	if arg[1] != m[1] || arg[2] != m[2] || num(arg[3]) < num(m[3]) {
		t.Errorf("Dockerfile builds with Go %s, go.mod says go %s: want the same minor version, at least go.mod's", arg[0], m[0])
	}
	var froms []string
	for _, l := range lines {
		if kw, rest, _ := strings.Cut(l, " "); kw == "FROM" {
			froms = append(froms, rest)
		}
	}
	if len(froms) != 2 || !strings.HasPrefix(froms[0], "golang:${GO_VERSION}-") {
		t.Errorf("Dockerfile: FROM %q, want two stages, the first golang:${GO_VERSION}-...", froms)
	}
	all := strings.Join(lines, "\n")
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "./cmd/worker", "./cmd/enqueue",
		"-X github.com/cairnhq/cairn/cmd/internal/version.Version=${VERSION}"} {
		if !strings.Contains(all, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	if u := instruction(lines, "USER"); u == "" || u == "root" || strings.HasPrefix(u, "0:") || u == "0" {
		t.Errorf("Dockerfile: USER %q, want a user that is not root", u)
	}
	ep := dockerEntrypoint(t)
	cf := loadCompose(t, map[string]string{"CAIRN_DASHBOARD_SECRET": composeSecret})
	for _, name := range []string{"worker", "dashboard"} {
		if hc := cf.Services[name].Healthcheck.Test; len(hc) < 2 || hc[1] != ep[0] {
			t.Errorf("%s: healthcheck %q does not run the image's worker binary %s", name, hc, ep[0])
		}
	}
	if hc := instruction(lines, "HEALTHCHECK"); !strings.Contains(hc, `CMD ["`+ep[0]+`", "--healthcheck"]`) {
		t.Errorf("Dockerfile: HEALTHCHECK %q, want the exec form of %s --healthcheck (no shell in the image)", hc, ep[0])
	}
}

// composeProc is one process of a compose service, as the test runs it.
type composeProc struct {
	name string
	env  []string // the service's environment, with the test's addresses
	args []string
	base string // http://<its CAIRN_HTTP_ADDR>
	proc *proctest.Proc
}

// serviceEnv is a service's environment with the compose network's
// addresses replaced by the test's: Redis, its own HTTP address, the
// tokens file. Every other variable is passed as the file says; the
// CAIRN_* variables of the environment the tests run in are blanked.
func serviceEnv(t *testing.T, name string, s composeService, redisAddr, httpAddr, tokens string) []string {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "CAIRN_") {
			if _, set := s.Environment[k]; !set {
				env = append(env, k+"=")
			}
		}
	}
	for k, v := range s.Environment {
		switch k {
		case "CAIRN_REDIS_URL":
			u, err := url.Parse(v)
			if err != nil {
				t.Fatalf("%s: CAIRN_REDIS_URL %q: %v", name, v, err)
			}
			u.Host = redisAddr
			v = u.String()
		case "CAIRN_HTTP_ADDR":
			v = httpAddr
		case "CAIRN_API_TOKENS_FILE":
			v = tokens
		}
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	return env
}

// composeHTTP is the tests' HTTP client: bounded, and it does not follow
// redirects (the sign-in's Set-Cookie is on its 303).
var composeHTTP = &http.Client{Timeout: 20 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// call sends a request and returns the status and body.
func call(t *testing.T, method, u string, header map[string]string, body string) (int, http.Header, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := composeHTTP.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

func bearer(token string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + token}
}

// TestComposeServicesStart runs what `docker compose up --scale worker=2`
// runs, as processes: a redis-server with the redis service's arguments,
// two workers and two dashboards with the environment and arguments of
// their services (the addresses replaced by the test's), and checks that
// the workers become ready, without warnings about Redis or the CSRF
// secret; that the health checks of the compose file pass; that a run
// started through one dashboard completes and shows through the other;
// that each worker's /metrics answers and together they count the run's
// steps; that a CSRF token one dashboard gave is accepted by the other;
// that an admin reaches asynqmon under /monitoring; and that each process
// stops gracefully on SIGTERM within its stop_grace_period.
func TestComposeServicesStart(t *testing.T) {
	testkit.SkipShort(t, needsProcesses)
	t.Parallel()
	cf := loadCompose(t, map[string]string{"CAIRN_DASHBOARD_SECRET": composeSecret})
	bin := proctest.Build(t, workerPkg)
	entry := dockerEntrypoint(t)
	srv := redistest.Start(t, &redistest.Options{Args: composeRedisArgs(t, cf.Services["redis"])})
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(composeUserToken+" alice user\n"+composeAdminToken+" ops admin\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	// The replicas, each on its own address, as the compose network gives
	// each container its own.
	var procs []*composeProc
	for _, r := range []struct {
		service string
		n       int
	}{{"worker", 2}, {"dashboard", 2}} {
		s := cf.Services[r.service]
		for i := range r.n {
			addr := testkit.FreeAddr(t)
			procs = append(procs, &composeProc{name: fmt.Sprintf("%s-%d", r.service, i+1),
				env: serviceEnv(t, r.service, s, srv.Addr(), addr, tokens), args: s.Command, base: "http://" + addr})
		}
	}
	workers, dashboards := procs[:2], procs[2:]

	// The health check: the compose file's command, its binary the test's.
	healthcheck := func(p *composeProc, service string) (int, string) {
		t.Helper()
		hc := cf.Services[service].Healthcheck.Test
		if hc[1] != entry[0] {
			t.Fatalf("%s: the healthcheck runs %s, the image's worker is %s", service, hc[1], entry[0])
		}
		stdout, stderr, code := proctest.Run(t, bin, p.env, "", hc[2:]...)
		return code, stdout + stderr
	}
	if code, out := healthcheck(dashboards[0], "dashboard"); code != 1 {
		t.Errorf("healthcheck before the dashboard started: exit %d (%s), want 1 (unhealthy)", code, out)
	}

	for _, p := range procs {
		p.proc = proctest.Start(t, bin, p.env, p.args...)
	}
	for _, p := range procs {
		if strings.HasPrefix(p.name, "worker") {
			p.proc.WaitForOutput(t, "worker started", 30*time.Second)
		}
		p.proc.WaitForOutput(t, "HTTP API listening", 30*time.Second)
	}
	for _, p := range procs {
		service, _, _ := strings.Cut(p.name, "-")
		if code, out := healthcheck(p, service); code != 0 || !strings.HasPrefix(out, "ready") {
			t.Errorf("%s: healthcheck exit %d (%s), want 0", p.name, code, out)
		}
		if st, _, body := call(t, "GET", p.base+"/readyz", nil, ""); st != http.StatusOK {
			t.Errorf("%s: /readyz %d %s", p.name, st, body)
		}
	}

	// A run started through one dashboard completes, and the other shows it.
	st, _, body := call(t, "POST", dashboards[0].base+"/api/v1/workflows",
		map[string]string{"Authorization": "Bearer " + composeUserToken, "Content-Type": "application/json"},
		`{"workflow":"demo","input":{}}`)
	var run workflow.Run
	if st != http.StatusCreated || json.Unmarshal([]byte(body), &run) != nil || run.ID == "" {
		t.Fatalf("start through %s: %d %s", dashboards[0].name, st, body)
	}
	testkit.Eventually(t, 30*time.Second, "the run to succeed, seen through "+dashboards[1].name, func() bool {
		st, _, body := call(t, "GET", dashboards[1].base+"/api/v1/workflows/"+run.ID, bearer(composeUserToken), "")
		var got workflow.Run
		if st != http.StatusOK || json.Unmarshal([]byte(body), &got) != nil {
			t.Fatalf("GET the run on %s: %d %s", dashboards[1].name, st, body)
		}
		if got.Status == workflow.StatusFailed || got.Status == workflow.StatusCancelled {
			t.Fatalf("the run ended %s: %s", got.Status, body)
		}
		return got.Status == workflow.StatusSucceeded
	})

	// Each worker's /metrics answers (with a token: the address is not
	// loopback in a container), and together they counted the three steps.
	// The worker counts a step after its checkpoint, so the last step's
	// count can follow the run's success by a moment: poll.
	for _, w := range workers {
		if st, _, _ := call(t, "GET", w.base+"/metrics", nil, ""); st != http.StatusUnauthorized {
			t.Errorf("%s: /metrics without a token: %d, want 401", w.name, st)
		}
	}
	countSucceeded := func() float64 {
		succeeded := 0.0
		for _, w := range workers {
			st, _, body := call(t, "GET", w.base+"/metrics", bearer(composeUserToken), "")
			if st != http.StatusOK {
				t.Fatalf("%s: /metrics %d %s", w.name, st, body)
			}
			parser := expfmt.NewTextParser(model.UTF8Validation)
			families, err := parser.TextToMetricFamilies(strings.NewReader(body))
			if err != nil {
				t.Fatalf("%s: /metrics does not parse: %v", w.name, err)
			}
			// A worker that ran none of the steps has no series of the
			// counter yet (the family is absent): it counted zero.
			f := families["cairn_step_attempts_total"]
			for _, m := range f.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["workflow"] == "demo" && labels["outcome"] == "succeeded" {
					succeeded += m.GetCounter().GetValue()
				}
			}
		}
		return succeeded
	}
	succeeded := 0.0
	testkit.Eventually(t, 10*time.Second, "the workers' /metrics to count 3 succeeded demo attempts", func() bool {
		succeeded = countSucceeded()
		return succeeded >= 3
	})
	if succeeded != 3 {
		t.Errorf("the workers' /metrics count %v succeeded demo attempts, want 3 (fetch, transform, deliver)", succeeded)
	}

	// Sign in on one dashboard; the CSRF token of its page works on the
	// other, as a load balancer would send the page's action there.
	st, hdr, body := call(t, "POST", dashboards[0].base+"/signin",
		map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, "token="+composeUserToken+"&next=/")
	var cookie string
	for _, c := range (&http.Response{Header: hdr}).Cookies() {
		if c.Name == dashboard.CookieName {
			cookie = c.Value
		}
	}
	if st != http.StatusSeeOther || cookie == "" {
		t.Fatalf("sign-in on %s: %d, cookie %q: %s", dashboards[0].name, st, cookie, body)
	}
	withCookie := map[string]string{"Cookie": dashboard.CookieName + "=" + cookie}
	st, _, page := call(t, "GET", dashboards[0].base+"/", withCookie, "")
	m := regexp.MustCompile(`<meta name="csrf-token" content="([^"]+)">`).FindStringSubmatch(page)
	if st != http.StatusOK || m == nil {
		t.Fatalf("the runs page of %s: %d, no CSRF token:\n%s", dashboards[0].name, st, page)
	}
	csrf := html.UnescapeString(m[1])
	action := func(token string) (int, string) {
		h := map[string]string{"Cookie": withCookie["Cookie"], dashboard.CSRFHeader: token, "Content-Type": "application/json"}
		st, _, body := call(t, "POST", dashboards[1].base+"/api/v1/workflows", h, `{"workflow":"demo","input":{}}`)
		return st, body
	}
	if st, body := action(csrf); st != http.StatusCreated {
		t.Errorf("an action on %s with the CSRF token of %s's page: %d %s, want 201", dashboards[1].name, dashboards[0].name, st, body)
	}
	if st, body := action(csrf[:len(csrf)-2] + "xx"); st != http.StatusForbidden || !strings.Contains(body, dashboard.ProblemCSRF) {
		t.Errorf("an action on %s with a wrong CSRF token: %d %s, want 403 %s", dashboards[1].name, st, body, dashboard.ProblemCSRF)
	}

	// asynqmon, for an admin only, on the compose file's Redis.
	for _, d := range dashboards {
		if st, _, body := call(t, "GET", d.base+dashboard.MonitoringPath+"/", bearer(composeAdminToken), ""); st != http.StatusOK ||
			!strings.Contains(body, "<title>Asynq - Monitoring</title>") {
			t.Errorf("%s: %s/ as admin: %d %.200s", d.name, dashboard.MonitoringPath, st, body)
		}
		if st, _, body := call(t, "GET", d.base+dashboard.MonitoringPath+"/api/queues", bearer(composeAdminToken), ""); st != http.StatusOK ||
			!strings.Contains(body, `"queue":"workflows"`) {
			t.Errorf("%s: asynqmon's queues as admin: %d %.300s; want the workflows queue", d.name, st, body)
		}
		if st, _, _ := call(t, "GET", d.base+dashboard.MonitoringPath+"/", bearer(composeUserToken), ""); st != http.StatusForbidden {
			t.Errorf("%s: %s/ as a user: %d, want 403", d.name, dashboard.MonitoringPath, st)
		}
	}

	// docker compose down: SIGTERM, then SIGKILL after stop_grace_period.
	for _, p := range procs {
		p.proc.Signal(t, syscall.SIGTERM)
	}
	for _, p := range procs {
		service, _, _ := strings.Cut(p.name, "-")
		grace, err := time.ParseDuration(cf.Services[service].StopGracePeriod)
		if err != nil {
			t.Fatalf("%s: stop_grace_period: %v", service, err)
		}
		if code := p.proc.Wait(t, grace); code != 0 {
			t.Errorf("%s: exit code %d after SIGTERM, want 0", p.name, code)
		}
		out := p.proc.Output()
		for _, bad := range []string{"CAIRN_DASHBOARD_SECRET is unset", "Redis appendonly is off", "Redis may evict workflow state", composeSecret} {
			if strings.Contains(out, bad) {
				t.Errorf("%s: the output has %q:\n%s", p.name, bad, out)
			}
		}
	}
}
