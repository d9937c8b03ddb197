package workerapp

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/cmd/internal/config"
)

const testSecret = "4e07408562bedb8b60ce05c1decfe3ad16b72230967de01f640b7e4729b49fce"

func TestWarnUnsharedCSRF(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name          string
		cfg           config.Config
		dashboardOnly bool
		warn          bool
	}{
		{"worker, tokens, every interface", config.Config{APITokensFile: "t", HTTPAddr: "0.0.0.0:8080"}, false, true},
		{"worker, tokens, a host's address", config.Config{APITokensFile: "t", HTTPAddr: "10.0.0.5:8080"}, false, true},
		{"worker, tokens, loopback", config.Config{APITokensFile: "t", HTTPAddr: "127.0.0.1:8080"}, false, false},
		{"worker, tokens, localhost", config.Config{APITokensFile: "t", HTTPAddr: "localhost:8080"}, false, false},
		{"dashboard only, tokens, loopback", config.Config{APITokensFile: "t", HTTPAddr: "127.0.0.1:8080"}, true, true},
		{"dashboard only, tokens, every interface", config.Config{APITokensFile: "t", HTTPAddr: ":8080"}, true, true},
		{"dashboard only, no tokens (no CSRF check)", config.Config{HTTPAddr: "127.0.0.1:8080"}, true, false},
		{"worker, no HTTP", config.Config{APITokensFile: "t", HTTPAddr: ""}, false, false},
		{"a secret", config.Config{APITokensFile: "t", HTTPAddr: "0.0.0.0:8080", DashboardSecret: testSecret}, true, false},
	} {
		var logs bytes.Buffer
		warnUnsharedCSRF(tt.cfg, tt.dashboardOnly, slog.New(slog.NewTextHandler(&logs, nil)))
		got := logs.String()
		if warned := strings.Contains(got, "level=WARN") && strings.Contains(got, "CAIRN_DASHBOARD_SECRET is unset"); warned != tt.warn {
			t.Errorf("%s: warned %v, want %v; logs: %q", tt.name, warned, tt.warn, got)
		}
		if strings.Contains(got, testSecret) {
			t.Errorf("%s: the log shows the secret: %q", tt.name, got)
		}
	}
}
