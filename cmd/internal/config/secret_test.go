package config_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/cmd/internal/config"
)

// goodSecret is what `openssl rand -hex 32` prints.
const goodSecret = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

func TestDashboardSecret(t *testing.T) {
	t.Parallel()
	c, err := config.Load([]string{"CAIRN_DASHBOARD_SECRET=" + goodSecret})
	if err != nil {
		t.Fatal(err)
	}
	if string(c.DashboardSecret) != goodSecret {
		t.Fatalf("DashboardSecret %q, want the variable's value", string(c.DashboardSecret))
	}
	for _, environ := range [][]string{nil, {"CAIRN_DASHBOARD_SECRET="}} {
		c, err := config.Load(environ)
		if err != nil || c.DashboardSecret != "" {
			t.Errorf("Load(%q): DashboardSecret %q, %v; want unset", environ, string(c.DashboardSecret), err)
		}
	}
	// The shortest accepted secret.
	if _, err := config.Load([]string{"CAIRN_DASHBOARD_SECRET=" + goodSecret[:config.MinDashboardSecretLength]}); err != nil {
		t.Errorf("a secret of %d bytes: %v", config.MinDashboardSecretLength, err)
	}
}

func TestDashboardSecretRejectsWeak(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, secret, msg string
	}{
		{"short", "0123456789abcdef", "too short (16 bytes): want at least 32"},
		{"one byte short", goodSecret[:config.MinDashboardSecretLength-1], "too short (31 bytes)"},
		{"one character", strings.Repeat("a", 64), "too weak (1 distinct characters)"},
		{"a short pattern", strings.Repeat("abc123", 8), "too weak (6 distinct characters)"},
		{"trailing newline", goodSecret + "\n", "white space"},
		{"leading space", " " + goodSecret, "white space"},
	} {
		_, err := config.Load([]string{"CAIRN_DASHBOARD_SECRET=" + tt.secret})
		if err == nil {
			t.Errorf("%s: accepted", tt.name)
			continue
		}
		if got := vars(err); len(got) != 1 || got[0] != "CAIRN_DASHBOARD_SECRET" {
			t.Errorf("%s: error about %v, want CAIRN_DASHBOARD_SECRET: %v", tt.name, got, err)
		}
		if !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%s: %q does not say %q", tt.name, err, tt.msg)
		}
		if strings.Contains(err.Error(), strings.TrimSpace(tt.secret)) {
			t.Errorf("%s: the error quotes the secret: %q", tt.name, err)
		}
	}
}

// TestDashboardSecretIsRedacted: printing or logging a Config never shows
// the secret.
func TestDashboardSecretIsRedacted(t *testing.T) {
	t.Parallel()
	c, err := config.Load([]string{"CAIRN_DASHBOARD_SECRET=" + goodSecret})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	log.Info("config", "secret", c.DashboardSecret, "config", c)
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("config", "secret", c.DashboardSecret)
	for _, out := range []string{fmt.Sprint(c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c), fmt.Sprint(c.DashboardSecret), logs.String()} {
		if strings.Contains(out, goodSecret) {
			t.Errorf("the secret shows in %q", out)
		}
		if !strings.Contains(out, "[redacted]") {
			t.Errorf("%q does not say the secret is redacted", out)
		}
	}
	if got := config.Secret("").String(); got != "" {
		t.Errorf("an unset secret prints as %q, want \"\"", got)
	}
}
