package workerapp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/cairnhq/cairn/cmd/internal/config"
)

// healthcheckTimeout bounds the probe; a container runtime's own timeout
// (docker-compose.yml: 5s) should be longer.
const healthcheckTimeout = 3 * time.Second

// runHealthcheck is `worker --healthcheck`: it asks the HTTP server of a
// worker or dashboard on this host, at CAIRN_HTTP_ADDR, whether it is
// ready (GET /readyz: the server answers and Redis answers PING). It
// exits 0 when it is and 1 otherwise, as a container health check must
// (Docker reserves 2), so that an image without a shell or curl
// (distroless) can run it. It prints one line saying what it found.
func runHealthcheck(ctx context.Context, environ []string, out io.Writer) int {
	cfg, err := config.Load(environ)
	if err != nil {
		fmt.Fprintf(out, "unhealthy: bad configuration: %v\n", err)
		return 1
	}
	url, err := readyzURL(cfg.HTTPAddr)
	if err != nil {
		fmt.Fprintf(out, "unhealthy: %v\n", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(ctx, healthcheckTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		fmt.Fprintf(out, "unhealthy: %v\n", err)
		return 1
	}
	// No proxy: the server is on this host.
	client := &http.Client{Transport: &http.Transport{Proxy: nil}}
	resp, err := client.Do(req)
	if err != nil {
		fmt.Fprintf(out, "unhealthy: %v\n", err)
		return 1
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(out, "unhealthy: GET %s: %s\n", url, resp.Status)
		return 1
	}
	fmt.Fprintf(out, "ready: GET %s: %s\n", url, resp.Status)
	return 0
}

// readyzURL is the URL of /readyz on a server listening on addr: an
// address of every interface (0.0.0.0, ::, no host) is probed on
// loopback.
func readyzURL(addr string) (string, error) {
	if addr == "" {
		return "", errors.New("CAIRN_HTTP_ADDR is empty: there is no HTTP server to probe (disable the health check instead)")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("CAIRN_HTTP_ADDR %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	return "http://" + net.JoinHostPort(host, port) + "/readyz", nil
}
