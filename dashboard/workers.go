package dashboard

import (
	"context"
	"net/http"

	"github.com/cairnhq/cairn/workflow"
)

// WorkersPath is the web UI's Workers page (admins).
const WorkersPath = "/workers"

// WorkerList is the answer of GET /api/v1/workers: the live workers, per
// queue (the dashboard's queue).
type WorkerList struct {
	Queues []QueueWorkers `json:"queues"`
}

// QueueWorkers are the live workers of one queue: Served tells whether any
// serves it (runs wait, pending, until one does); More that some were left
// out (more than workflow.MaxWorkers of a kind).
type QueueWorkers struct {
	Queue   string                `json:"queue"`
	Served  bool                  `json:"served"`
	Workers []workflow.WorkerInfo `json:"workers"`
	More    bool                  `json:"more,omitempty"`
}

// readWorkers reads the live workers of the dashboard's queue.
func (s *Server) readWorkers(ctx context.Context) (WorkerList, error) {
	ws, more, err := s.client.Workers(ctx)
	if err != nil {
		return WorkerList{}, err
	}
	if ws == nil {
		ws = []workflow.WorkerInfo{}
	}
	return WorkerList{Queues: []QueueWorkers{{Queue: s.client.Queue(), Served: len(ws) > 0, Workers: ws, More: more}}}, nil
}

// workers answers GET /api/v1/workers (admins: host names and pids are
// operators' data).
func (s *Server) workers(w http.ResponseWriter, r *http.Request) {
	l, err := s.readWorkers(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, l)
}

// noWorker returns the dashboard's queue when one of runs waits for a
// worker and no live worker serves the queue, "" otherwise: one cheap read
// (workflow.Client.Served), made only when a run waits for a worker; a
// failed read shows no notice. Only this boolean of the workers reaches a
// user who is not an admin.
func (s *Server) noWorker(r *http.Request, runs ...*workflow.Run) string {
	for _, run := range runs {
		if !run.WaitsForWorker() {
			continue
		}
		served, err := s.client.Served(r.Context())
		if err != nil {
			reqLog(r).Warn("cannot tell whether a live worker serves the queue", "error", err)
			return ""
		}
		if served {
			return ""
		}
		return s.client.Queue()
	}
	return ""
}

// workersPage lists the live workers (the data of GET /api/v1/workers),
// refreshed every few seconds by the page's script.
func (u *webUI) workersPage(w http.ResponseWriter, r *http.Request, p Principal) {
	v := u.newView(r, p, "workers", "Workers")
	l, err := u.s.readWorkers(r.Context())
	if err != nil {
		u.fail(w, r, p, err)
		return
	}
	v.Live = WorkersPath + "?" + fragmentParam + "=1"
	v.Poll = true
	v.Data = l
	u.render(w, r, http.StatusOK, v)
}
