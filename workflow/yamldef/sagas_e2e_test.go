package yamldef_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/workflow"
)

// requestLog is a test server that answers each request with its route's
// handler and records it, in order of arrival.
type requestLog struct {
	mu   sync.Mutex
	hits []hit
	srv  *httptest.Server
}

// newRequestLog starts a server whose routes map "METHOD /path" to a
// handler; any other request gets 404.
func newRequestLog(t *testing.T, routes map[string]http.HandlerFunc) *requestLog {
	t.Helper()
	l := &requestLog{}
	l.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		l.mu.Lock()
		l.hits = append(l.hits, hit{at: time.Now(), path: r.Method + " " + r.URL.Path, query: r.URL.RawQuery,
			header: r.Header.Clone(), body: string(b)})
		l.mu.Unlock()
		if h, ok := routes[r.Method+" "+r.URL.Path]; ok {
			h(w, r)
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(l.srv.Close)
	return l
}

// all returns the requests so far.
func (l *requestLog) all() []hit {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.hits)
}

// paths returns "METHOD /path" of each request so far.
func (l *requestLog) paths() []string {
	var out []string
	for _, h := range l.all() {
		out = append(out, h.path)
	}
	return out
}

// answer returns a handler that answers status with body (JSON when it
// looks like it).
func answer(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if strings.HasPrefix(body, "{") {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// sagaEventsOf returns "type step" of the run's saga events, in order.
func sagaEventsOf(evs []workflow.Event) []string {
	var out []string
	for _, ev := range evs {
		switch ev.Type {
		case workflow.EventRunCompensating, workflow.EventCompensationStarted, workflow.EventCompensationSucceeded,
			workflow.EventCompensationFailed, workflow.EventRunCompensated, workflow.EventGroupRolledBack,
			workflow.EventRunFailed, workflow.EventRunSucceeded:
			out = append(out, strings.TrimSpace(ev.Type+" "+ev.Step))
		}
	}
	return out
}

// TestYAMLSagaCompensatesInReverse: a YAML saga whose third step fails
// permanently (400) runs the compensations of its second, then its first
// step, last first: each sends its request, rendered from the compensated
// step's output (.compensation.output, .steps) and the run's failure
// (.compensation.failure_code, failure_reason). The second step's
// compensation fails once (503) and is retried under its own retry
// settings. The fourth step never runs; the run ends compensated, keeping
// its failure.
func TestYAMLSagaCompensatesInReverse(t *testing.T) {
	t.Parallel()
	var refunds sync.Mutex
	refundCalls := 0
	log := newRequestLog(t, map[string]http.HandlerFunc{
		"POST /reservations":          answer(http.StatusCreated, `{"id": "r-17"}`),
		"POST /charges":               answer(http.StatusOK, `{"charge_id": 12345678901234567890, "amount": 42}`),
		"POST /shipments":             answer(http.StatusBadRequest, "address refused"),
		"DELETE /reservations/r-17":   answer(http.StatusNoContent, ""),
		"POST /notify":                answer(http.StatusOK, "{}"),
		"DELETE /shipments/never-ran": answer(http.StatusOK, "{}"),
		"POST /refunds": func(w http.ResponseWriter, r *http.Request) {
			refunds.Lock()
			refundCalls++
			n := refundCalls
			refunds.Unlock()
			if n == 1 {
				answer(http.StatusServiceUnavailable, "busy")(w, r)
				return
			}
			answer(http.StatusOK, `{"refunded": true}`)(w, r)
		},
	})
	h := startWorker(t, "saga.yaml", fmt.Sprintf(`workflows:
  order:
    on_failure: compensate
    resiliency:
      retry: {max_attempts: 1}
    steps:
      - name: reserve
        type: http
        with: {method: POST, url: "%[1]s/reservations", body: '{"sku": {{json .input.sku}}}'}
        compensate:
          type: http
          with: {method: DELETE, url: "%[1]s/reservations/{{.compensation.output.body.id}}"}
      - name: charge
        type: http
        with: {method: POST, url: "%[1]s/charges", body: '{"amount": {{.input.amount}}}'}
        compensate:
          type: http
          retry: {max_attempts: 3, initial_delay: 50ms, jitter: none}
          with:
            method: POST
            url: "%[1]s/refunds"
            headers: {X-Failure: "{{.compensation.failure_code}}", X-Compensates: "{{.compensation.step}}"}
            body: '{"charge": {{json .compensation.output.body.charge_id}}, "reservation": {{json .steps.reserve.body.id}}, "reason": {{json .compensation.failure_reason}}}'
      - name: ship
        type: http
        with: {method: POST, url: "%[1]s/shipments"}
        compensate: {type: http, with: {method: DELETE, url: "%[1]s/shipments/never-ran"}}
      - name: notify
        type: http
        with: {method: POST, url: "%[1]s/notify"}
`, log.srv.URL))

	run := h.run("order", map[string]any{"sku": "A-1", "amount": 42}, 60*time.Second)
	if run.Status != workflow.StatusCompensated || run.FailureCode != workflow.CodePermanentError ||
		!strings.Contains(run.FailureReason, "400 Bad Request: address refused") {
		t.Fatalf("run ended %s (%s: %s); want compensated with permanent_error and the 400", run.Status, run.FailureCode, run.FailureReason)
	}
	want := []string{"POST /reservations", "POST /charges", "POST /shipments", "POST /refunds", "POST /refunds",
		"DELETE /reservations/r-17"}
	if got := log.paths(); !slices.Equal(got, want) {
		t.Fatalf("requests\n got %q\nwant %q", got, want)
	}
	hits := log.all()
	for i, r := range hits[3:5] {
		wantBody := fmt.Sprintf(`{"charge": 12345678901234567890, "reservation": "r-17", "reason": %q}`, run.FailureReason)
		if r.header.Get("X-Failure") != workflow.CodePermanentError || r.header.Get("X-Compensates") != "charge" ||
			r.body != wantBody || r.header.Get("Idempotency-Key") != fmt.Sprintf("%s:compensate:charge:%d", run.ID, i+1) {
			t.Errorf("refund %d: headers %v body\n got %s\nwant %s", i+1, r.header, r.body, wantBody)
		}
	}
	if k := hits[5].header.Get("Idempotency-Key"); k != run.ID+":compensate:reserve:1" {
		t.Errorf("release: Idempotency-Key %q", k)
	}
	for name, st := range map[string]workflow.StepStatus{"reserve": workflow.StepCompensated, "charge": workflow.StepCompensated,
		"ship": workflow.StepFailed, "notify": workflow.StepPending} {
		if got := run.Step(name).Status; got != st {
			t.Errorf("step %s is %s, want %s", name, got, st)
		}
	}
	if c := run.Step("charge").Compensation; c == nil || c.Status != workflow.StepSucceeded || c.Attempts != 2 {
		t.Errorf("charge's compensation: %+v; want succeeded after 2 attempts", c)
	}
	if c := run.Step("reserve").Compensation; c == nil || c.Status != workflow.StepSucceeded || c.Attempts != 1 {
		t.Errorf("reserve's compensation: %+v; want succeeded after 1 attempt", c)
	}
	// The retry of the refund follows the compensation's own retry
	// settings: the workflow allows one attempt per step.
	evs := h.events(run.ID)
	var delays []string
	for _, ev := range evs {
		if ev.Type == workflow.EventRetryScheduled {
			delays = append(delays, ev.Step+" "+ev.Details["delay_ms"])
		}
	}
	if want := []string{workflow.CompensationPrefix + "charge 50"}; !slices.Equal(delays, want) {
		t.Errorf("retries %q, want %q", delays, want)
	}
	wantEvents := []string{"run_compensating ship", "compensation_started charge",
		"compensation_succeeded charge", "compensation_started reserve", "compensation_succeeded reserve", "run_compensated"}
	if got := sagaEventsOf(evs); !slices.Equal(got, wantEvents) {
		t.Errorf("journal\n got %q\nwant %q", got, wantEvents)
	}
}

// TestYAMLOptionalGroupRollsBack: a step of an optional group that fails
// permanently rolls the group back (the compensation of its succeeded step
// sends its request, rendered from that step's output) and the run goes on
// after the group, to succeed. The workflow stops on failure (the
// default): an optional group does not need on_failure: compensate.
func TestYAMLOptionalGroupRollsBack(t *testing.T) {
	t.Parallel()
	log := newRequestLog(t, map[string]http.HandlerFunc{
		"POST /orders":       answer(http.StatusOK, `{"order": 7}`),
		"POST /gifts":        answer(http.StatusOK, `{"gift_id": "g-1"}`),
		"POST /wrap":         answer(http.StatusBadRequest, "no paper"),
		"DELETE /gifts/g-1":  answer(http.StatusOK, "{}"),
		"DELETE /orders/7":   answer(http.StatusOK, "{}"),
		"POST /ship":         answer(http.StatusOK, "{}"),
		"DELETE /wrap/never": answer(http.StatusOK, "{}"),
	})
	h := startWorker(t, "groups.yaml", fmt.Sprintf(`workflows:
  checkout:
    resiliency:
      retry: {max_attempts: 1}
    groups:
      extras: {optional: true}
    steps:
      - name: order
        type: http
        with: {method: POST, url: "%[1]s/orders"}
        compensate: {type: http, with: {method: DELETE, url: "%[1]s/orders/{{.compensation.output.body.order}}"}}
      - name: gift
        type: http
        group: extras
        with: {method: POST, url: "%[1]s/gifts", body: '{"order": {{.steps.order.body.order}}}'}
        compensate:
          type: http
          with: {method: DELETE, url: "%[1]s/gifts/{{.steps.gift.body.gift_id}}", headers: {X-Failure: "{{.compensation.failure_code}}"}}
      - name: wrap
        type: http
        group: extras
        with: {method: POST, url: "%[1]s/wrap"}
        compensate: {type: http, with: {method: DELETE, url: "%[1]s/wrap/never"}}
      - name: ship
        type: http
        with: {method: POST, url: "%[1]s/ship"}
`, log.srv.URL))

	run := h.run("checkout", nil, 60*time.Second)
	if run.Status != workflow.StatusSucceeded || run.FailureCode != "" {
		t.Fatalf("run ended %s (%s: %s); want succeeded", run.Status, run.FailureCode, run.FailureReason)
	}
	want := []string{"POST /orders", "POST /gifts", "POST /wrap", "DELETE /gifts/g-1", "POST /ship"}
	if got := log.paths(); !slices.Equal(got, want) {
		t.Fatalf("requests\n got %q\nwant %q", got, want)
	}
	if f := log.all()[3].header.Get("X-Failure"); f != workflow.CodePermanentError {
		t.Errorf("the gift's compensation got failure code %q, want %s", f, workflow.CodePermanentError)
	}
	for _, name := range []string{"gift", "wrap"} {
		if st := run.Step(name); st.Status != workflow.StepRolledBack || st.Group != "extras" || !st.GroupOptional {
			t.Errorf("step %s: %s in group %q (optional %v); want rolled_back in the optional group extras", name, st.Status,
				st.Group, st.GroupOptional)
		}
	}
	for _, name := range []string{"order", "ship"} {
		if st := run.Step(name); st.Status != workflow.StepSucceeded || st.Group != "" {
			t.Errorf("step %s: %s in group %q; want succeeded in none", name, st.Status, st.Group)
		}
	}
	evs := h.events(run.ID)
	wantEvents := []string{"run_compensating wrap", "compensation_started gift", "compensation_succeeded gift",
		"group_rolled_back wrap", "run_succeeded"}
	if got := sagaEventsOf(evs); !slices.Equal(got, wantEvents) {
		t.Errorf("journal\n got %q\nwant %q", got, wantEvents)
	}
	if n := testkit.CountEvents(evs, workflow.EventAttemptSucceeded, "ship"); n != 1 {
		t.Errorf("%d attempt_succeeded events for ship, want 1", n)
	}
}
