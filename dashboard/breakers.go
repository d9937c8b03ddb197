package dashboard

import (
	"net/http"

	"github.com/cairnhq/cairn/workflow"
)

// BreakerList is the answer of GET /api/v1/breakers.
type BreakerList struct {
	Breakers []workflow.BreakerState `json:"breakers"`
}

// breakers answers GET /api/v1/breakers: every circuit breaker of the
// queue. Breakers are shared by every user's runs, so every user sees them.
func (s *Server) breakers(w http.ResponseWriter, r *http.Request) {
	bs, err := s.client.Breakers(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if bs == nil {
		bs = []workflow.BreakerState{}
	}
	writeJSON(w, http.StatusOK, BreakerList{Breakers: bs})
}

// resetBreaker answers POST /api/v1/admin/breakers/{name}/reset: the
// breaker closes at once. The reset is recorded in the audit stream.
func (s *Server) resetBreaker(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := s.client.ResetBreaker(r.Context(), name); err != nil {
		s.fail(w, r, err)
		return
	}
	p := principal(r)
	if _, err := s.client.RecordAudit(r.Context(), workflow.AuditEntry{Actor: p.Subject, Action: "breaker_reset",
		Detail: "reset circuit breaker " + name}); err != nil {
		reqLog(r).Error("breaker reset not recorded in the audit stream", "breaker", name, workflow.AttrError, err)
	}
	reqLog(r).Info("circuit breaker reset", "breaker", name)
	bs, err := s.client.Breakers(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	for _, b := range bs {
		if b.Name == name {
			writeJSON(w, http.StatusOK, b)
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}
