package dashboard

import (
	"net/http"

	"github.com/hibiken/asynqmon"
)

// MonitoringPath is where asynqmon is mounted.
const MonitoringPath = "/monitoring"

// mountMonitoring mounts asynqmon at /monitoring for admins, read-only
// unless Config.MonitoringWrite. asynqmon's own pages cannot send an
// Authorization header, so they authenticate with the cookie, and since
// they cannot send X-CSRF-Token either, its state changes (write mode) are
// guarded by the cross-origin check every request passes (a browser's
// request from another site is refused) instead of the CSRF token.
func (s *Server) mountMonitoring() {
	if s.cfg.Monitoring == nil {
		return
	}
	mon := asynqmon.New(asynqmon.Options{
		RootPath:     MonitoringPath,
		RedisConnOpt: s.cfg.Monitoring,
		ReadOnly:     !s.cfg.MonitoringWrite,
	})
	s.monitoring = mon
	h := s.requireAuth(true, true, mon)
	s.mux.Handle(MonitoringPath+"/", h)
	s.mux.Handle("GET "+MonitoringPath, http.RedirectHandler(MonitoringPath+"/", http.StatusFound))
}
