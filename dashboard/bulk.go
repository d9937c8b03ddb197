package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/cairnhq/cairn/workflow"
)

// BulkPath is the admins' endpoint of bulk actions: recover or cancel the
// runs listed, or every run a filter matches.
const BulkPath = "/api/v1/admin/workflows/bulk"

// Bounds of a bulk action.
const (
	// MaxBulkRuns is how many runs one bulk action may apply to: more
	// listed IDs are a 400, a filter that selects more a 422.
	MaxBulkRuns = 500
	// maxBulkPages bounds the pages of bulkPageSize runs a filter's
	// listing reads (a page of a listing filtered by workflow or owner
	// examines up to ten times as many index entries); a filter that needs
	// more is refused (422): narrow it.
	maxBulkPages = 10
	bulkPageSize = 500
	// bulkTimeout bounds the time a bulk action takes to apply.
	bulkTimeout = 2 * time.Minute
)

// BulkRequest is the body of POST /api/v1/admin/workflows/bulk. It names
// the runs by IDs or by Filter (one of the two). A dry run says which runs
// the action would apply to (Eligible, IDs) and writes nothing; the action
// itself must carry Expect, the number of runs the confirmation showed: if
// the runs eligible now are not that many, nothing is done (409).
type BulkRequest struct {
	// Action is "recover" or "cancel".
	Action string `json:"action"`
	// IDs are the runs to act on (at most MaxBulkRuns).
	IDs []string `json:"ids,omitempty"`
	// Filter selects the runs as the runs list does.
	Filter *BulkFilter `json:"filter,omitempty"`
	// DryRun: only count.
	DryRun bool `json:"dry_run,omitempty"`
	// Expect is how many runs the caller confirmed; required unless
	// DryRun.
	Expect *int `json:"expect,omitempty"`
}

// BulkFilter selects runs by status, workflow and owner (each optional),
// as GET /api/v1/workflows does.
type BulkFilter struct {
	Status   string `json:"status,omitempty"`
	Workflow string `json:"workflow,omitempty"`
	Owner    string `json:"owner,omitempty"`
}

// BulkResult is the answer of a bulk action.
type BulkResult struct {
	Action string `json:"action"`
	DryRun bool   `json:"dry_run"`
	// Matched counts the runs named or selected that exist; Eligible
	// those in a state the action applies to (recover: failed, or
	// needing attention; cancel: pending, running or compensating),
	// listed in IDs.
	Matched  int      `json:"matched"`
	Eligible int      `json:"eligible"`
	IDs      []string `json:"ids"`
	// Applied lists the runs the action was applied to; Refused the
	// others, each with the reason (a run whose state changed meanwhile).
	Applied []string      `json:"applied"`
	Refused []BulkRefusal `json:"refused"`
}

// BulkRefusal is a run a bulk action did not apply to, and why.
type BulkRefusal struct {
	ID     string `json:"id"`
	Detail string `json:"detail"`
}

// canRecover tells whether recover applies to a run (as the run page's
// button).
func canRecover(r *workflow.Run) bool {
	return r.Status == workflow.StatusFailed || (r.NeedsAttention && !r.Terminal())
}

// canCancel tells whether cancel applies to a run.
func canCancel(r *workflow.Run) bool {
	return r.Status == workflow.StatusPending || r.Status == workflow.StatusRunning ||
		r.Status == workflow.StatusCompensating
}

// checkBulk validates a bulk request before anything is read.
func checkBulk(req *BulkRequest) error {
	switch req.Action {
	case actionRecover, actionCancel:
	default:
		return problemf(http.StatusBadRequest, ProblemInvalidRequest, "field \"action\" must be \"recover\" or \"cancel\"")
	}
	if (len(req.IDs) > 0) == (req.Filter != nil) {
		return problemf(http.StatusBadRequest, ProblemInvalidRequest, "give either \"ids\" (a non-empty list) or \"filter\"")
	}
	if len(req.IDs) > MaxBulkRuns {
		return problemf(http.StatusBadRequest, ProblemInvalidRequest, "%d run IDs: at most %d at once", len(req.IDs), MaxBulkRuns)
	}
	for _, id := range req.IDs {
		if !workflow.ValidRunID(id) {
			return problemf(http.StatusBadRequest, ProblemInvalidRunID, "%q is not a run ID", cut(id, 80))
		}
	}
	if f := req.Filter; f != nil {
		if f.Status != "" && !workflow.RunStatus(f.Status).Valid() {
			return problemf(http.StatusBadRequest, ProblemInvalidRequest, "filter status %q: not a run status", cut(f.Status, 40))
		}
		if f.Workflow != "" && !workflowNameRE.MatchString(f.Workflow) {
			return problemf(http.StatusBadRequest, ProblemInvalidRequest, "filter workflow %q: not a workflow name", cut(f.Workflow, 80))
		}
		if len(f.Owner) > 128 {
			return problemf(http.StatusBadRequest, ProblemInvalidRequest, "filter owner longer than 128 bytes")
		}
	}
	if !req.DryRun && req.Expect == nil {
		return problemf(http.StatusBadRequest, ProblemInvalidRequest,
			"field \"expect\" is required: the number of runs the confirmation showed (get it with \"dry_run\": true)")
	}
	return nil
}

// bulk answers POST /api/v1/admin/workflows/bulk (admins only): recover or
// cancel many runs, each as its single action would (journaled with the
// admin as actor, audited when the run is another subject's).
func (s *Server) bulk(w http.ResponseWriter, r *http.Request) {
	var req BulkRequest
	if err := decodeBody(w, r, &req, true); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := checkBulk(&req); err != nil {
		s.fail(w, r, err)
		return
	}
	runs, matched, err := s.bulkRuns(r.Context(), &req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res := BulkResult{Action: req.Action, DryRun: req.DryRun, Matched: matched, Eligible: len(runs),
		IDs: make([]string, len(runs)), Applied: []string{}, Refused: []BulkRefusal{}}
	for i, run := range runs {
		res.IDs[i] = run.ID
	}
	if req.DryRun {
		writeJSON(w, http.StatusOK, res)
		return
	}
	if *req.Expect != len(runs) {
		s.fail(w, r, problemf(http.StatusConflict, ProblemConflict,
			"%d runs are eligible now, not the %d confirmed: nothing was done; confirm again", len(runs), *req.Expect))
		return
	}
	p := principal(r)
	// Once begun, the action goes on to the end of its list even if the
	// caller goes away: a half-applied list would be arbitrary.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), bulkTimeout)
	defer cancel()
	opts := &workflow.ActionOptions{Actor: p.Subject}
	for _, run := range runs {
		var err error
		switch req.Action {
		case actionRecover:
			_, err = s.client.Recover(ctx, run.ID, opts)
		case actionCancel:
			_, err = s.client.Cancel(ctx, run.ID, opts)
		}
		if err != nil {
			detail := "internal error; the server log has the details under correlation_id " + reqState(r).id
			if ae := errorProblem(ctx, err); ae != nil {
				detail = ae.detail
			} else {
				reqLog(r).Error("bulk action on a run failed", workflow.AttrRunID, run.ID, "action", req.Action, "error", err)
			}
			res.Refused = append(res.Refused, BulkRefusal{ID: run.ID, Detail: detail})
			continue
		}
		res.Applied = append(res.Applied, run.ID)
		reqLog(r).Info("operator action applied", workflow.AttrRunID, run.ID, workflow.AttrActor, p.Subject,
			"action", req.Action, "bulk", true)
		if run.Owner != p.Subject {
			s.recordAudit(r, workflow.AuditEntry{Actor: p.Subject, Action: req.Action, RunID: run.ID, Workflow: run.Workflow,
				Owner: run.Owner, Detail: fmt.Sprintf("bulk action on another subject's run (%d runs confirmed)", len(runs))})
		}
	}
	reqLog(r).Info("bulk action done", "action", req.Action, "applied", len(res.Applied), "refused", len(res.Refused))
	writeJSON(w, http.StatusOK, res)
}

// bulkRuns returns the runs of a bulk request the action applies to, and
// how many runs it names or selects in all.
func (s *Server) bulkRuns(ctx context.Context, req *BulkRequest) ([]*workflow.Run, int, error) {
	eligible := canRecover
	if req.Action == actionCancel {
		eligible = canCancel
	}
	var out []*workflow.Run
	matched := 0
	if req.Filter == nil {
		seen := make(map[string]bool, len(req.IDs))
		for _, id := range req.IDs {
			if seen[id] {
				continue
			}
			seen[id] = true
			run, err := s.client.Get(ctx, id)
			if errors.Is(err, workflow.ErrRunNotFound) {
				continue
			}
			if err != nil {
				return nil, 0, err
			}
			matched++
			if eligible(run) {
				out = append(out, run)
			}
		}
		return out, matched, nil
	}
	f := req.Filter
	cursor := ""
	for page := 1; ; page++ {
		runs, next, err := s.client.List(ctx, workflow.ListOptions{Status: workflow.RunStatus(f.Status), Workflow: f.Workflow,
			Owner: f.Owner, Cursor: cursor, Limit: bulkPageSize})
		if err != nil {
			return nil, 0, err
		}
		for _, run := range runs {
			matched++
			if eligible(run) {
				out = append(out, run)
			}
		}
		if len(out) > MaxBulkRuns {
			return nil, 0, problemf(http.StatusUnprocessableEntity, ProblemInvalidRequest,
				"the filter selects more than %d runs to %s: narrow it (by status, workflow or owner)", MaxBulkRuns, req.Action)
		}
		if next == "" {
			return out, matched, nil
		}
		if page >= maxBulkPages {
			return nil, 0, problemf(http.StatusUnprocessableEntity, ProblemInvalidRequest,
				"the filter selects more runs than one bulk action examines (%d): narrow it (by status, workflow or owner)",
				maxBulkPages*bulkPageSize)
		}
		cursor = next
	}
}

// bulkFilterText describes a filter, for the confirmation.
func bulkFilterText(status, wf, owner string) string {
	var parts []string
	if status != "" {
		parts = append(parts, "status "+status)
	}
	if wf != "" {
		parts = append(parts, "workflow "+wf)
	}
	if owner != "" {
		parts = append(parts, "owner "+owner)
	}
	if len(parts) == 0 {
		return "every run"
	}
	return strings.Join(parts, ", ")
}
