package dashboard_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/dashboard"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/tasks"
	"github.com/cairnhq/cairn/workflow"
)

// hostile is markup a worker's host, ID or queue names could hold.
const hostile = `"><script>alert(1)</script><img src=x onerror=alert(2)>&`

// fakeWorker is a worker's heartbeat and record on queue, as a worker on
// Cairn's own dequeue writes them, without the worker: it takes no task,
// so the runs it "serves" stay where they are.
type fakeWorker struct {
	e  *env
	dq *tasks.Dequeuer
}

func (e *env) fakeWorker(id, host string, queues []string) *fakeWorker {
	e.t.Helper()
	dq := tasks.NewDequeuer(e.rdb, e.queue, id)
	dq.Describe(func() tasks.WorkerInfo {
		return tasks.WorkerInfo{Host: host, PID: 4242, Queues: queues, Concurrency: 3, InFlight: 2,
			StartedAt: time.Now().Add(-time.Hour), Version: host}
	})
	f := &fakeWorker{e: e, dq: dq}
	f.beat()
	e.t.Cleanup(func() { _ = dq.Leave(context.Background()) })
	return f
}

// beat renews the heartbeat for a minute: long enough for any test.
func (f *fakeWorker) beat() {
	f.e.t.Helper()
	if _, err := f.dq.Housekeep(context.Background(), time.Now(), time.Minute); err != nil {
		f.e.t.Fatal(err)
	}
}

func (f *fakeWorker) leave() {
	f.e.t.Helper()
	if err := f.dq.Leave(context.Background()); err != nil {
		f.e.t.Fatal(err)
	}
}

const noWorkerText = "No live worker serves queue"

// TestNoWorkerNotice: with no live worker, the run list and the page of a
// pending run say so, naming the queue (escaped), to everyone who can see
// the run: the owner and an admin; another user learns nothing of it.
// Once a worker's heartbeat is on, the notice is gone; once it leaves, it
// is back. A list without a run waiting for a worker has no notice.
func TestNoWorkerNotice(t *testing.T) {
	t.Parallel()
	queue := testkit.Queue(t, "d") + hostile
	e := newEnv(t, envOptions{noWorker: true, ui: true, queue: queue})
	run := e.start("alice", inputOK)
	escaped := "&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;&amp;"

	type page struct {
		path, token string
		status      int
		notice      bool
	}
	check := func(when string, pages []page) {
		t.Helper()
		for _, p := range pages {
			resp := e.page(p.path, p.token)
			html := resp.html()
			if resp.status != p.status {
				t.Errorf("%s: %s as %s: status %d, want %d", when, p.path, p.token, resp.status, p.status)
				continue
			}
			if got := strings.Contains(html, noWorkerText); got != p.notice {
				t.Errorf("%s: %s as %s: notice %v, want %v", when, p.path, p.token, got, p.notice)
			}
			if strings.Contains(html, "<script>alert(1)") || strings.Contains(html, "<img src=x") {
				t.Errorf("%s: %s as %s: the queue's name is not escaped", when, p.path, p.token)
			}
			if p.notice && !strings.Contains(html, `id="no-worker"`) || p.notice && !strings.Contains(html, escaped) {
				t.Errorf("%s: %s as %s: the notice does not name the queue, escaped", when, p.path, p.token)
			}
		}
	}
	runPath := "/runs/" + run.ID
	check("no worker", []page{
		{"/", aliceToken, 200, true},
		{"/?fragment=1", aliceToken, 200, true},
		{runPath, aliceToken, 200, true},
		{runPath + "?fragment=1", aliceToken, 200, true},
		{runPath, bobToken, 404, false},
		{"/", bobToken, 200, false}, // bob has no run waiting
		{"/", rootToken, 200, true},
		{runPath, rootToken, 200, true},
	})

	w := e.fakeWorker("host:1:live", "host", []string{queue})
	check("a live worker", []page{
		{"/", aliceToken, 200, false},
		{runPath, aliceToken, 200, false},
		{runPath, rootToken, 200, false},
	})
	w.leave()
	check("the worker left", []page{
		{"/", aliceToken, 200, true},
		{runPath, aliceToken, 200, true},
	})

	// A run that waits for nothing (cancelled) gets no notice.
	if _, err := e.client.Cancel(context.Background(), run.ID, nil); err != nil {
		t.Fatal(err)
	}
	check("the run cancelled", []page{
		{"/", aliceToken, 200, false},
		{runPath, aliceToken, 200, false},
	})
}

// TestWorkersPage: the nav links the Workers page for admins alone (who
// may see it: TestWorkersMatrix), and the page lists a worker's record
// with its host, queues and version escaped; with none, it says no worker
// serves the queue.
func TestWorkersPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{noWorker: true, ui: true})
	if html := e.page("/", rootToken).html(); !strings.Contains(html, `href="/workers"`) {
		t.Error("no Workers link in an admin's nav")
	}
	if html := e.page("/", aliceToken).html(); strings.Contains(html, `href="/workers"`) {
		t.Error("a Workers link in a user's nav")
	}

	resp := e.page(dashboard.WorkersPath, rootToken)
	if html := resp.html(); !strings.Contains(html, noWorkerText) || strings.Contains(html, "data-worker=") {
		t.Errorf("Workers page with no worker:\n%s", html)
	}

	e.fakeWorker("evil:1:"+hostile, hostile, []string{e.queue, hostile})
	html := e.page(dashboard.WorkersPath, rootToken).html()
	if strings.Contains(html, "<script>alert(1)") || strings.Contains(html, "<img src=x") {
		t.Fatalf("the worker's record is not escaped:\n%s", html)
	}
	for _, want := range []string{`data-worker="evil:1:&#34;&gt;&lt;script&gt;`, `<td data-label="In flight" class="in-flight">2 / 3</td>`,
		`<td data-label="PID">4242</td>`, `<span class="tag">cairn</span>`} {
		if !strings.Contains(html, want) {
			t.Errorf("Workers page lacks %s:\n%s", want, html)
		}
	}
	if strings.Contains(html, noWorkerText) {
		t.Error("Workers page says no worker serves the queue while one does")
	}

	var l dashboard.WorkerList
	resp = e.do(req{method: "GET", path: "/api/v1/workers", token: rootToken})
	resp.decode(t, &l)
	if len(l.Queues) != 1 || l.Queues[0].Queue != e.queue || !l.Queues[0].Served || len(l.Queues[0].Workers) != 1 {
		t.Fatalf("GET /api/v1/workers: %s", resp.body)
	}
	got := l.Queues[0].Workers[0]
	if got.ID != "evil:1:"+hostile || got.Host != hostile || got.PID != 4242 || got.Concurrency != 3 || got.InFlight != 2 ||
		got.Kind != workflow.WorkerKindCairn || len(got.Queues) != 2 || got.Queues[1] != hostile || got.LastHeartbeat == nil {
		t.Fatalf("worker %+v", got)
	}
}
