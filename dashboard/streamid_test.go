package dashboard_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/dashboard"
	"github.com/cairnhq/cairn/internal/demo"
	"github.com/cairnhq/cairn/workflow"
)

// Stream IDs at the edges of their range: both parts are unsigned 64-bit
// integers.
const (
	maxStreamID = "18446744073709551615-18446744073709551615"
	maxMsID     = "18446744073709551615-0"
)

// TestStreamIDsOutOfRange: GET /api/v1/admin/audit?after= and GET
// /api/v1/events's Last-Event-ID (header or ?last_event_id=) take the
// largest stream IDs and answer 400 for a part beyond uint64 or an ID
// without its sequence number; nothing logs a warning.
func TestStreamIDsOutOfRange(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorker: true})
	ctx := context.Background()
	if _, err := e.client.RecordAudit(ctx, workflow.AuditEntry{Actor: "root", Action: "test"}); err != nil {
		t.Fatal(err)
	}

	bad := []struct{ id, detail string }{
		{"18446744073709551616-0", "64-bit"},
		{"0-18446744073709551616", "64-bit"},
		{"99999999999999999999-0", "64-bit"},
		{"0-99999999999999999999", "64-bit"},
		{"999999999999999999999999-0", "64-bit"},
		{"1700000000000", "sequence"},
		{"18446744073709551615", "sequence"},
		{"-1", ""},
		{"1-2-3", ""},
		{"+1-0", ""},
		{"1-", ""},
		{strings.Repeat("1", 300) + "-0", ""},
	}
	for _, b := range bad {
		for _, where := range []string{"audit", "last_event_id", "Last-Event-ID"} {
			var r req
			name := "Last-Event-ID"
			switch where {
			case "audit":
				r, name = req{method: "GET", path: "/api/v1/admin/audit?after=" + url.QueryEscape(b.id), token: rootToken}, "after"
			case "last_event_id":
				r = req{method: "GET", path: "/api/v1/events?last_event_id=" + url.QueryEscape(b.id), token: rootToken, stream: true}
			default:
				r = req{method: "GET", path: "/api/v1/events", token: rootToken, stream: true, header: map[string]string{"Last-Event-ID": b.id}}
			}
			resp := e.do(r)
			if resp.status != 400 {
				t.Errorf("%s %q: status %d, want 400", where, b.id, resp.status)
				continue
			}
			p := resp.problem(t)
			if p.Type != dashboard.ProblemType(dashboard.ProblemInvalidRequest) || !strings.Contains(p.Detail, name) ||
				!strings.Contains(p.Detail, b.detail) {
				t.Errorf("%s %q: problem %+v, want invalid-request naming %s, with %q", where, b.id, p, name, b.detail)
			}
			if len(p.Detail) > 200 {
				t.Errorf("%s %q: detail of %d bytes", where, b.id, len(p.Detail))
			}
		}
	}

	// The largest IDs are valid: nothing comes after them in the audit...
	for _, id := range []string{maxStreamID, maxMsID} {
		resp := e.do(req{method: "GET", path: "/api/v1/admin/audit?after=" + id, token: rootToken})
		var al dashboard.AuditList
		if resp.status != 200 {
			t.Fatalf("audit after %s: %d %s", id, resp.status, resp.body)
		}
		resp.decode(t, &al)
		if len(al.Entries) != 0 || al.Next != id {
			t.Errorf("audit after %s: %+v, want no entries and next %s", id, al, id)
		}
	}
	// ... and an event stream resuming after them, which is after the
	// newest notification, gets the next one.
	streams := []*stream{e.openStream("max", rootToken, maxStreamID), e.openStream("max ms", rootToken, maxMsID)}
	run, err := e.client.Start(ctx, demo.Name, []byte(`{}`), &workflow.StartOptions{Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.Cancel(ctx, run.ID, nil); err != nil {
		t.Fatal(err)
	}
	for _, s := range streams {
		s.next(10*time.Second, ofRun(run.ID, "run_cancelled"))
	}
	if logs := e.logs.String(); strings.Contains(logs, "level=WARN") || strings.Contains(logs, "level=ERROR") {
		t.Errorf("warnings logged:\n%s", logs)
	}
}
