package workerapp

import (
	"log/slog"
	"net"

	"github.com/cairnhq/cairn/cmd/internal/config"
)

// warnUnsharedCSRF warns, when CAIRN_DASHBOARD_SECRET is unset, that this
// process's CSRF tokens are its own, where that is likely to matter: a
// --dashboard-only server with tokens (a deployment of its own, often
// replicated), or a worker with tokens on an address other hosts reach.
// Without tokens there is no CSRF check at all.
func warnUnsharedCSRF(cfg config.Config, dashboardOnly bool, log *slog.Logger) {
	if cfg.DashboardSecret != "" || cfg.APITokensFile == "" || cfg.HTTPAddr == "" {
		return
	}
	if !dashboardOnly && loopbackAddr(cfg.HTTPAddr) {
		return
	}
	log.Warn("CAIRN_DASHBOARD_SECRET is unset: this process's CSRF key is random, so replicas do not accept each other's CSRF tokens "+
		"(an action from a page another replica served, or served before a restart, gets 403); "+
		"set the same CAIRN_DASHBOARD_SECRET on every replica (openssl rand -hex 32)",
		"addr", cfg.HTTPAddr)
}

// loopbackAddr reports whether a host:port listens on loopback only.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
