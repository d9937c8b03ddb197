package workerapp

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/internal/testkit"
)

func TestReadyzURL(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		"127.0.0.1:8080": "http://127.0.0.1:8080/readyz",
		"0.0.0.0:8080":   "http://127.0.0.1:8080/readyz",
		":8080":          "http://127.0.0.1:8080/readyz",
		"[::]:9090":      "http://[::1]:9090/readyz",
		"[::1]:9090":     "http://[::1]:9090/readyz",
		"localhost:80":   "http://localhost:80/readyz",
		"10.1.2.3:8080":  "http://10.1.2.3:8080/readyz",
	} {
		if got, err := readyzURL(addr); err != nil || got != want {
			t.Errorf("readyzURL(%q) = %q, %v; want %q", addr, got, err, want)
		}
	}
	if _, err := readyzURL(""); err == nil || !strings.Contains(err.Error(), "CAIRN_HTTP_ADDR is empty") {
		t.Errorf("readyzURL(\"\") = %v, want an error saying the address is empty", err)
	}
}

// readyServer answers GET /readyz with status on a loopback port; it
// returns the port.
func readyServer(t *testing.T, status int) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return port
}

func TestHealthcheck(t *testing.T) {
	t.Parallel()
	ready, notReady := readyServer(t, http.StatusOK), readyServer(t, http.StatusServiceUnavailable)
	_, nothing, err := net.SplitHostPort(testkit.FreeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		environ []string
		code    int
		out     string
	}{
		{"ready", []string{"CAIRN_HTTP_ADDR=127.0.0.1:" + ready}, 0, "ready: GET http://127.0.0.1:" + ready + "/readyz: 200 OK"},
		{"listening on every interface", []string{"CAIRN_HTTP_ADDR=0.0.0.0:" + ready}, 0, "ready"},
		{"not ready", []string{"CAIRN_HTTP_ADDR=127.0.0.1:" + notReady}, 1, "unhealthy: GET http://127.0.0.1:" + notReady + "/readyz: 503"},
		{"nothing listening", []string{"CAIRN_HTTP_ADDR=127.0.0.1:" + nothing}, 1, "connection refused"},
		{"no HTTP server", []string{"CAIRN_HTTP_ADDR="}, 1, "CAIRN_HTTP_ADDR is empty"},
		// Docker reserves exit code 2: a bad configuration is unhealthy too.
		{"bad configuration", []string{"CAIRN_HTTP_ADDR=127.0.0.1:" + ready, "CAIRN_CONCURRENCY=many"}, 1, "bad configuration: CAIRN_CONCURRENCY"},
	} {
		var out bytes.Buffer
		code := runHealthcheck(context.Background(), tt.environ, &out)
		if code != tt.code || !strings.HasPrefix(out.String(), map[int]string{0: "ready: ", 1: "unhealthy: "}[tt.code]) ||
			!strings.Contains(out.String(), tt.out) {
			t.Errorf("%s: exit %d, output %q; want %d and %q", tt.name, code, out.String(), tt.code, tt.out)
		}
		if strings.Count(out.String(), "\n") != 1 {
			t.Errorf("%s: output %q is not one line", tt.name, out.String())
		}
	}
}
