package dashboard

import (
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/cairnhq/cairn/workflow"
)

// signal serves POST /api/v1/workflows/{id}/signals/{name}[?id=SIGNAL_ID]:
// the body is the signal's JSON payload (empty: null), at most
// workflow.MaxSignalPayload bytes. The caller must see the run (its owner,
// or an admin: another subject's run is 404); an admin's signal to another
// subject's run is audited. The answer is a workflow.SignalResult.
func (s *Server) signal(w http.ResponseWriter, r *http.Request) {
	name, sid := r.PathValue("name"), r.URL.Query().Get("id")
	if len(name) > 128 {
		s.fail(w, r, problemf(http.StatusBadRequest, ProblemInvalidRequest, "signal name longer than 128 bytes"))
		return
	}
	if len(sid) > workflow.MaxSignalID {
		s.fail(w, r, problemf(http.StatusBadRequest, ProblemInvalidRequest, "signal id longer than %d bytes", workflow.MaxSignalID))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, workflow.MaxSignalPayload))
	if tooLarge, ok := errors.AsType[*http.MaxBytesError](err); ok {
		s.fail(w, r, problemf(http.StatusRequestEntityTooLarge, ProblemBodyTooLarge, "signal payload larger than %d bytes", tooLarge.Limit))
		return
	}
	if err != nil {
		s.fail(w, r, problemf(http.StatusBadRequest, ProblemInvalidRequest, "reading the request body: %v", err))
		return
	}
	run, err := s.loadRun(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p := principal(r)
	res, err := s.client.Signal(r.Context(), run.ID, name, body, &workflow.SignalOptions{ID: sid, Actor: p.Subject})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	reqLog(r).Info("signal sent", workflow.AttrRunID, run.ID, workflow.AttrActor, p.Subject, "signal", name,
		"outcome", res.Outcome)
	if p.IsAdmin() && run.Owner != p.Subject && res.Outcome != workflow.SignalDuplicate {
		s.recordAudit(r, workflow.AuditEntry{Actor: p.Subject, Action: "signal", RunID: run.ID, Workflow: run.Workflow,
			Owner: run.Owner, Step: res.Step, Detail: "signal " + name + " to another subject's run"})
	}
	writeJSON(w, http.StatusOK, res)
}

// waitView fills the run page's wait: what the run waits for while its
// current step awaits a signal or sleeps, and the signal the form sends.
func waitView(d *runData, now time.Time) {
	w := d.Run.WaitingFor
	if d.Run.Terminal() || w == nil || w.Until == nil || (w.Signal == "" && !w.Timer) {
		return
	}
	d.Waiting = w
	if left := w.Until.Sub(now); left > 0 {
		d.WaitLeft = "in " + left.Round(time.Second).String()
	} else {
		d.WaitLeft = "due now"
	}
	d.Signal = w.Signal
}
