package workerapp

import (
	"bytes"
	"context"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// testEnv isolates Main from CAIRN_* variables of the environment the
// tests run in: an empty value takes the default, but for CAIRN_HTTP_ADDR,
// where it turns the HTTP API off (its default, 127.0.0.1:8080, is a fixed
// port that parallel tests would contend for); a test that wants the API
// appends its own address (the last setting of a variable wins).
func testEnv(embeddedAddr string) []string {
	return []string{
		"CAIRN_REDIS_URL=", "CAIRN_EMBEDDED_ADDR=" + embeddedAddr, "CAIRN_QUEUE=", "CAIRN_CONCURRENCY=", "CAIRN_HTTP_ADDR=",
		"CAIRN_LOG_FORMAT=text", "CAIRN_LOG_LEVEL=info", "CAIRN_RETRY_JITTER=", "CAIRN_SHUTDOWN_TIMEOUT=10s",
	}
}

// runMain runs Main in-process as the binary runs it without arguments,
// with env appended to the test's environment, and returns what it wrote
// and its exit code. It is for runs that end by themselves (a bad
// configuration, a failure at start).
func runMain(t *testing.T, env []string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errs bytes.Buffer
	code = Main(context.Background(), nil, &out, &errs, append(os.Environ(), env...))
	return out.String(), errs.String(), code
}

func TestBadConfigurationExits2(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  []string
		vars []string // named on stderr
	}{
		{"bad integer", []string{"CAIRN_CONCURRENCY=abc"}, []string{"CAIRN_CONCURRENCY"}},
		{"bad enum", []string{"CAIRN_RETRY_JITTER=sometimes"}, []string{"CAIRN_RETRY_JITTER"}},
		{"bad URL", []string{"CAIRN_REDIS_URL=http://localhost:6379"}, []string{"CAIRN_REDIS_URL"}},
		{"Sentinel URL without a master", []string{"CAIRN_REDIS_URL=redis-sentinel://:hunter2@10.0.0.1,10.0.0.2/0"},
			[]string{"CAIRN_REDIS_URL: no master name"}},
		{"cluster URL with a database", []string{"CAIRN_REDIS_URL=redis-cluster://:hunter2@10.0.0.1/2"},
			[]string{"CAIRN_REDIS_URL: database \"2\""}},
		{"replicas without a Redis", []string{"CAIRN_REDIS_MIN_REPLICAS=1"}, []string{"CAIRN_REDIS_MIN_REPLICAS"}},
		{"two bad values", []string{"CAIRN_RETRY_JITTER=sometimes", "CAIRN_LOG_FORMAT=xml"},
			[]string{"CAIRN_RETRY_JITTER", "CAIRN_LOG_FORMAT"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, code := runMain(t, append(testEnv(testkit.FreeAddr(t)), tt.env...))
			if code != 2 {
				t.Errorf("exit code %d, want 2\nstderr:\n%s", code, stderr)
			}
			if !strings.Contains(stderr, "bad configuration") {
				t.Errorf("stderr does not say the configuration is bad:\n%s", stderr)
			}
			for _, v := range tt.vars {
				if !strings.Contains(stderr, v) {
					t.Errorf("stderr does not name %s:\n%s", v, stderr)
				}
			}
			if strings.Contains(stderr, "hunter2") {
				t.Errorf("stderr shows the password:\n%s", stderr)
			}
			if strings.Contains(stderr, "EMBEDDED STORE") || stdout != "" {
				t.Errorf("worker started something with a bad configuration\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
			}
		})
	}
}

func TestEmbeddedAddressInUseExits1(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, stderr, code := runMain(t, testEnv(ln.Addr().String()))
	if code != 1 {
		t.Errorf("exit code %d, want 1\nstderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "embedded store: listen on "+ln.Addr().String()) ||
		!strings.Contains(stderr, "CAIRN_EMBEDDED_ADDR") {
		t.Errorf("stderr does not explain the address conflict:\n%s", stderr)
	}
}
