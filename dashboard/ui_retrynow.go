package dashboard

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/cairnhq/cairn/workflow"
)

// The run page's forms that work without JavaScript: a plain POST with the
// CSRF token in the form (field csrf, as the sign-out form), answered with
// a redirect to the run page (303), or the error page that says why
// (nothing written):
//
//	POST /runs/{id}/steps/{step}/retry-now  make a step's scheduled retry due now (the owner, an admin)
//	POST /runs/{id}/restore                 admins: restore a finished run from a checkpoint
//	                                        (from_step, and confirm=yes: the form's confirmation)
func (u *webUI) retryNowRoutes(mux *http.ServeMux) {
	mux.Handle("POST /runs/{id}/steps/{step}/retry-now", u.form(false, u.retryNowForm))
	mux.Handle("POST /runs/{id}/restore", u.form(true, u.restoreForm))
}

// retryNowFormURL is where the run page's "Retry now" of a step posts.
func retryNowFormURL(id, step string) string {
	return "/runs/" + url.PathEscape(id) + "/steps/" + url.PathEscape(step) + "/retry-now"
}

// restoreFormURL is where the run page's restore form posts.
func restoreFormURL(id string) string { return "/runs/" + url.PathEscape(id) + "/restore" }

// maxFormBytes bounds a form's body.
const maxFormBytes = 64 << 10

// form wraps the handler of a page's form: the caller authenticated (by
// the cookie, with the form's CSRF token; or by a bearer token), and an
// admin for an admin's form. A caller without valid credentials is sent to
// sign in; a cookie without the form's CSRF token is refused (403).
func (u *webUI) form(admin bool, h func(http.ResponseWriter, *http.Request, Principal)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		formErr := r.ParseForm()
		p, err := u.s.authenticate(r, false)
		if err != nil {
			http.Redirect(w, r, SignInPath+"?next="+url.QueryEscape("/runs/"+url.PathEscape(r.PathValue("id"))),
				http.StatusSeeOther)
			return
		}
		reqState(r).subject = p.Subject
		if formErr != nil {
			u.renderError(w, r, p, http.StatusBadRequest, "Malformed form.")
			return
		}
		if p.Via == "cookie" {
			c, _ := r.Cookie(CookieName)
			if !u.s.validCSRF(c.Value, r.PostForm.Get("csrf")) {
				u.renderError(w, r, p, http.StatusForbidden,
					"Missing or invalid CSRF token: reload the page and try again. Nothing was done.")
				return
			}
		}
		if admin && !p.IsAdmin() {
			u.renderError(w, r, p, http.StatusForbidden, "This action is for administrators.")
			return
		}
		h(w, r.WithContext(withPrincipal(r.Context(), p)), p)
	})
}

// retryNowForm makes the scheduled retry of step {step} of run {id} due
// now (workflow.Client.RetryNow), as POST .../steps/{step}/retry-now does.
func (u *webUI) retryNowForm(w http.ResponseWriter, r *http.Request, p Principal) {
	step := r.PathValue("step")
	if len(step) > 128 {
		u.renderError(w, r, p, http.StatusBadRequest, "Step name longer than 128 bytes.")
		return
	}
	run, err := u.s.loadRun(r)
	if err != nil {
		u.fail(w, r, p, err)
		return
	}
	if _, err := u.s.client.RetryNow(r.Context(), run.ID, step, &workflow.ActionOptions{Actor: p.Subject}); err != nil {
		u.fail(w, r, p, err)
		return
	}
	reqLog(r).Info("operator action applied", workflow.AttrRunID, run.ID, workflow.AttrActor, p.Subject,
		"action", actionRetryNow, workflow.AttrStep, step)
	if p.IsAdmin() && run.Owner != p.Subject {
		u.s.recordAudit(r, workflow.AuditEntry{Actor: p.Subject, Action: actionRetryNow, RunID: run.ID,
			Workflow: run.Workflow, Owner: run.Owner, Step: step, Detail: "action on another subject's run"})
	}
	http.Redirect(w, r, "/runs/"+url.PathEscape(run.ID), http.StatusSeeOther)
}

// restoreForm restores run {id} from the checkpoint before step from_step
// (workflow.Client.Restore, which records it in the audit stream), as POST
// /api/v1/admin/workflows/{id}/restore does, once the form's confirmation
// (confirm=yes) is ticked.
func (u *webUI) restoreForm(w http.ResponseWriter, r *http.Request, p Principal) {
	from := r.PostForm.Get("from_step")
	if strings.TrimSpace(from) == "" || len(from) > 128 {
		u.renderError(w, r, p, http.StatusBadRequest, "Choose the step to start again from. Nothing was done.")
		return
	}
	if r.PostForm.Get("confirm") != "yes" {
		u.renderError(w, r, p, http.StatusBadRequest,
			"Tick the confirmation to restore the run. Nothing was done.")
		return
	}
	run, err := u.s.loadRun(r)
	if err != nil {
		u.fail(w, r, p, err)
		return
	}
	if _, err := u.s.client.Restore(r.Context(), run.ID, from, &workflow.ActionOptions{Actor: p.Subject}); err != nil {
		u.fail(w, r, p, err)
		return
	}
	reqLog(r).Info("run restored", workflow.AttrRunID, run.ID, workflow.AttrActor, p.Subject, workflow.AttrStep, from)
	http.Redirect(w, r, "/runs/"+url.PathEscape(run.ID), http.StatusSeeOther)
}

// retryNowView sets what the run page shows of retry now and restore: the
// step whose scheduled retry the caller may make due now (its form's URL
// in the step's RetryNowURL), and, for an admin on a finished run, the
// steps it may be restored from.
func retryNowView(d *runData, p Principal) {
	run := d.Run
	for i := range d.Steps {
		sv := &d.Steps[i]
		if sv.Current && sv.Scheduled() && !sv.Snoozed && run.Warning == workflow.WarningRetryPending &&
			run.WaitingFor == nil && run.Paused == nil { // a paused run's retry waits for the resume
			sv.RetryNowURL = retryNowFormURL(run.ID, sv.Name)
		}
	}
	if !p.IsAdmin() || !run.Terminal() {
		return
	}
	d.RestoreURL = restoreFormURL(run.ID)
	for _, st := range run.Steps {
		d.RestoreFrom = append(d.RestoreFrom, st.Name)
		if st.Status != workflow.StepSucceeded && st.Status != workflow.StepSkipped {
			break // a restore starts at the latest from the first step not done
		}
	}
}
