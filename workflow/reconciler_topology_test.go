package workflow_test

import (
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/embedded"
	"github.com/cairnhq/cairn/internal/redistest"
	"github.com/cairnhq/cairn/internal/testkit"
	"github.com/cairnhq/cairn/tasks"
	"github.com/cairnhq/cairn/workflow"
)

// On a Redis Cluster the pass's checks (one pipeline of scripts, each
// reading a run and its task in asynq, and writing the task; the queue's
// entry in asynq:queues, on another master) repair lost retry tasks, also
// after the queue's master flushed its script cache (a restart).
func TestPassOnCluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, &redistest.ClusterOptions{Masters: 2})
	// A queue on the other master than asynq:queues.
	queues := c.QueuesOnDistinctMasters("rec")
	queue := queues[0]
	if c.MasterFor("{"+queue+"}") == c.MasterFor(tasks.AllQueues) {
		queue = queues[1]
	}
	rdb := c.Client(t)
	clock := newFakeClock()
	log := testkit.Logger(t)
	eng := publishedEngine(t, rdb, workflow.EngineConfig{Queue: queue, Logger: log, Clock: clock}, twoSteps(failing))
	client := workflow.NewClient(rdb, workflow.ClientConfig{Queue: queue, Logger: log, Clock: clock})
	ins := asynq.NewInspectorFromRedisClient(rdb)
	var retries []string
	for range 3 {
		run := mustStart(t, client, "two", nil)
		p := tasks.Step{RunID: run.ID, Workflow: "two", Index: 0, Name: "a", Attempt: 1}
		if err := eng.ProcessTask(ctxb, asynq.NewTask(tasks.TypeStep, p.Encode())); err != nil {
			t.Fatal(err)
		}
		retry := tasks.ID(run.ID, 0, 2, 0)
		if err := ins.DeleteTask(queue, retry); err != nil {
			t.Fatalf("delete %s: %v", retry, err)
		}
		retries = append(retries, retry)
	}
	if err := rdb.SRem(ctxb, tasks.AllQueues, queue).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.MasterFor("{" + queue + "}").Client(t).ScriptFlush(ctxb).Err(); err != nil {
		t.Fatal(err)
	}
	// Out of the grace, before the retries are due (10s after the failures).
	clock.Advance(6 * time.Second)
	rep, err := eng.NewReconciler(workflow.ReconcilerConfig{Grace: 5 * time.Second}).Pass(ctxb)
	if err != nil || !rep.Locked || rep.Repairs["retry_task_missing"] != len(retries) || rep.Total() != len(retries) {
		t.Fatalf("pass: %v (%+v), %v; want %d retry tasks repaired", rep, rep, err, len(retries))
	}
	for _, id := range retries {
		if info, err := ins.GetTaskInfo(queue, id); err != nil || info.State != asynq.TaskStateScheduled {
			t.Errorf("retry task %s: %+v, %v", id, info, err)
		}
	}
}

// On the embedded store (miniredis, its Lua) the pass's checks repair a lost
// retry task as on Redis.
func TestPassOnTheEmbeddedStore(t *testing.T) {
	t.Parallel()
	store, err := embedded.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rdb := redis.NewClient(&redis.Options{Addr: store.Addr()})
	defer func() { _ = rdb.Close() }()
	const queue = "emb"
	clock := newFakeClock()
	log := testkit.Logger(t)
	eng := publishedEngine(t, rdb, workflow.EngineConfig{Queue: queue, Logger: log, Clock: clock}, twoSteps(failing))
	client := workflow.NewClient(rdb, workflow.ClientConfig{Queue: queue, Logger: log, Clock: clock})
	ins := asynq.NewInspectorFromRedisClient(rdb)
	run := mustStart(t, client, "two", nil)
	p := tasks.Step{RunID: run.ID, Workflow: "two", Index: 0, Name: "a", Attempt: 1}
	if err := eng.ProcessTask(ctxb, asynq.NewTask(tasks.TypeStep, p.Encode())); err != nil {
		t.Fatal(err)
	}
	retry := tasks.ID(run.ID, 0, 2, 0)
	if err := ins.DeleteTask(queue, retry); err != nil {
		t.Fatalf("delete %s: %v", retry, err)
	}
	clock.Advance(6 * time.Second)
	rec := eng.NewReconciler(workflow.ReconcilerConfig{Grace: 5 * time.Second})
	rep, err := rec.Pass(ctxb)
	if err != nil || rep.Repairs["retry_task_missing"] != 1 || rep.Total() != 1 {
		t.Fatalf("pass: %v (%+v), %v; want the retry task repaired", rep, rep, err)
	}
	if info, err := ins.GetTaskInfo(queue, retry); err != nil || info.State != asynq.TaskStateScheduled {
		t.Errorf("retry task %s: %+v, %v", retry, info, err)
	}
	clock.Advance(6 * time.Second)
	if rep, err := rec.Pass(ctxb); err != nil || rep.Total() != 0 || rep.Checked == 0 {
		t.Errorf("second pass: %v (%+v), %v; want runs checked and nothing repaired", rep, rep, err)
	}
}
