package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/workflow/redisurl"
)

// The tests of docs/examples/service: the Dockerfile and compose override
// of docs/embedding.md's service. No machine of the project's builds
// images, so they are checked statically, and with docker-compose's own
// `config` (as make compose-check does for docker-compose.yml).

const (
	serviceDockerfile = "docs/examples/service/Dockerfile"
	serviceOverride   = "docs/examples/service/docker-compose.override.yml"
)

// dockerfileAt reads the Dockerfile at name (from the repository root) as
// dockerfile does: its instructions, continuation lines joined, comments
// dropped.
func dockerfileAt(t *testing.T, name string) []string {
	t.Helper()
	f, err := os.Open(repoFile(t, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	var cur strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if s, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(line)
		out = append(out, cur.String())
		cur.Reset()
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestServiceDockerfile: the service's image builds the example's main
// package with the Go of go.mod (as the repository's Dockerfile does),
// statically, runs it as a user that is not root, and listens on every
// interface of the container.
func TestServiceDockerfile(t *testing.T) {
	t.Parallel()
	lines := dockerfileAt(t, serviceDockerfile)
	goArg := func(lines []string) string {
		for _, l := range lines {
			if strings.HasPrefix(l, "ARG GO_VERSION=") {
				return l
			}
		}
		return ""
	}
	// The repository's Dockerfile agrees with go.mod (TestDockerfile).
	if got, want := goArg(lines), goArg(dockerfile(t)); got == "" || got != want {
		t.Errorf("%s: %q; the repository's Dockerfile has %q", serviceDockerfile, got, want)
	}
	all := strings.Join(lines, "\n")
	for _, want := range []string{"CGO_ENABLED=0", "GOTOOLCHAIN=local", "-trimpath", "COPY go.mod go.sum ./",
		"ARG MAIN=./docs/examples/service", "-o /out/service ${MAIN}", "ENV ADDR=0.0.0.0:8080"} {
		if !strings.Contains(all, want) {
			t.Errorf("%s lacks %q", serviceDockerfile, want)
		}
	}
	main, err := os.ReadFile(repoFile(t, "docs/examples/service/main.go"))
	if err != nil || !regexp.MustCompile(`(?m)^package main$`).Match(main) {
		t.Errorf("MAIN ./docs/examples/service is not a main package: %v", err)
	}
	if u := instruction(lines, "USER"); u == "" || u == "root" || u == "0" || strings.HasPrefix(u, "0:") {
		t.Errorf("%s: USER %q, want a user that is not root", serviceDockerfile, u)
	}
	var ep []string
	if err := json.Unmarshal([]byte(instruction(lines, "ENTRYPOINT")), &ep); err != nil || len(ep) != 1 ||
		!strings.Contains(all, "COPY --from=build /out/service "+ep[0]) {
		t.Errorf("%s: ENTRYPOINT %q, want the exec form of the binary the build stage made: %v", serviceDockerfile, ep, err)
	}
}

// TestServiceComposeOverride: the override adds the service on the compose
// file's Redis, with its tokens secret and the CSRF secret, on a loopback
// host port; and docker-compose itself accepts the two files together.
func TestServiceComposeOverride(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"CAIRN_DASHBOARD_SECRET": composeSecret}
	base := loadCompose(t, vars)
	over, err := parseCompose(repoFile(t, serviceOverride), vars)
	if err != nil {
		t.Fatal(err)
	}
	s, ok := over.Services["orders"]
	if !ok || len(over.Services) != 1 {
		t.Fatalf("%s: services %v, want orders alone", serviceOverride, over.Services)
	}
	build, _ := s.Build.(map[string]any)
	if build["context"] != "." || build["dockerfile"] != serviceDockerfile {
		t.Errorf("orders: build %v, want context . (the first file's directory) and dockerfile %s", s.Build, serviceDockerfile)
	}
	target, err := redisurl.Parse(s.Environment["CAIRN_REDIS_URL"])
	if err != nil {
		t.Errorf("orders: CAIRN_REDIS_URL: %v", err)
	} else if target.Single == nil || base.Services[strings.Split(target.Single.Addr, ":")[0]].Image == "" {
		t.Errorf("orders: CAIRN_REDIS_URL %q does not name a service of docker-compose.yml", s.Environment["CAIRN_REDIS_URL"])
	}
	if s.DependsOn["redis"].Condition != "service_healthy" {
		t.Errorf("orders: depends_on %v, want redis healthy", s.DependsOn)
	}
	tf := s.Environment["CAIRN_API_TOKENS_FILE"]
	if !slices.ContainsFunc(s.Secrets, func(r composeRef) bool {
		_, declared := base.Secrets[r.Source]
		return r.Target == tf && declared
	}) {
		t.Errorf("orders: CAIRN_API_TOKENS_FILE %q is not where a secret of docker-compose.yml is mounted (%+v)", tf, s.Secrets)
	}
	if s.Environment["CAIRN_DASHBOARD_SECRET"] != composeSecret {
		t.Errorf("orders: CAIRN_DASHBOARD_SECRET %q, want the operator's", s.Environment["CAIRN_DASHBOARD_SECRET"])
	}
	if _, err := parseCompose(repoFile(t, serviceOverride), map[string]string{}); err == nil ||
		!strings.Contains(err.Error(), "CAIRN_DASHBOARD_SECRET") {
		t.Errorf("without CAIRN_DASHBOARD_SECRET: %v, want it refused", err)
	}
	if len(s.Ports) != 1 || !strings.HasPrefix(s.Ports[0], "127.0.0.1:") || !strings.HasSuffix(s.Ports[0], ":8080") ||
		s.Environment["ADDR"] != "0.0.0.0:8080" {
		t.Errorf("orders: ports %q, ADDR %q: want a loopback host port to the container's 8080, on every interface inside",
			s.Ports, s.Environment["ADDR"])
	}

	dc, err := exec.LookPath("docker-compose")
	if err != nil {
		t.Fatal("docker-compose is not on PATH; install it (no Docker daemon needed): apt-get install --no-install-recommends docker-compose")
	}
	env := filepath.Join(t.TempDir(), "env")
	if err := os.WriteFile(env, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(dc, "--env-file", env, "-f", "docker-compose.yml", "-f", serviceOverride, "config", "-q")
	cmd.Dir = repoFile(t, ".")
	cmd.Env = append(os.Environ(), "CAIRN_DASHBOARD_SECRET="+composeSecret)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("docker-compose -f docker-compose.yml -f %s config -q: %v\n%s", serviceOverride, err, out)
	}
}
