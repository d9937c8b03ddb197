package retrystate

// Table tests of the scripts of signals and durable timers (wait.lua,
// signal.lua) and of what begin, create and repair do for awaits and sleeps;
// see scripts_table_test.go for how the tables run.

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/internal/redistest"
)

// awaits makes step idx an await of signal sig (timeout 60s) as create.lua
// writes it.
func (w *world) awaits(idx int, sig string) *world {
	return w.step(idx, "kind", "await", "signal", sig, "wait_ms", "60000")
}

// sleeps makes step idx a sleep of kind (sleep: 60s; sleep_until).
func (w *world) sleeps(idx int, kind string) *world {
	ms := "60000"
	if kind == "sleep_until" {
		ms = "0"
	}
	return w.step(idx, "kind", kind, "signal", "", "wait_ms", ms)
}

// waitingAt makes step idx, an await or a sleep (see awaits, sleeps), wait
// for reason ("signal" or "timer") until until, as wait.lua leaves it when
// it started to wait at tAttempt: its wake-up is gen 1 of attempt 1.
func (w *world) waitingAt(idx int, reason string, until int64) *world {
	w.pendingAt(idx).step(idx, "status", "waiting", "next_attempt_at", until, "task", taskID(idx, 1)+"_g1",
		"gen", "1", "started_at", tAttempt)
	if idx == 0 {
		w.set("status", "running", "started_at", tAttempt).move("pending", "running")
	}
	return w.set("updated_at", tAttempt).zadd(tk.active(), tAttempt, tRun).zadd(tk.scheduled(), until, tRun).
		zadd(tk.waiting(WaitReason(reason)), tAttempt, tRun)
}

// queued puts a signal in the run's mailbox.
func (w *world) queued(name, id, payload string) *world {
	w.do("XADD", tk.mailbox(tRun), "*", "name", name, "id", id, "payload", payload, "at", tAttempt)
	if id != "" {
		w.set("sig:"+id, tAttempt)
	}
	return w
}

func TestScriptCreateWaits(t *testing.T) {
	// call is a create whose step i is an await or a sleep when kinds[i]
	// says so: its kind, signal and wait_ms.
	type kind struct {
		kind, signal string
		wait         int64
	}
	call := func(kinds ...kind) createLua {
		c := createCall("o", "", 0, 0)
		for i, k := range kinds {
			c.Steps[i].Kind, c.Steps[i].Signal, c.Steps[i].Wait = k.kind, k.signal, k.wait
		}
		return c
	}
	luaTable{name: "create_waits", script: loadScripts().create,
		cases: []luaCase{
			{name: "created: an await and a sleep",
				seed: nothing(), call: call(kind{"", "", 0}, kind{"await", "approved", 172800000}, kind{"sleep", "", 600000}),
				reply: `["created" "R1_s0_a1" "1" "0"]`},
			{name: "created: a sleep until a computed time first",
				seed: nothing(), call: call(kind{"sleep_until", "", 0}), reply: `["created" "R1_s0_a1" "1" "0"]`},
		},
	}.run(t)
}

func TestScriptBeginWaits(t *testing.T) {
	wake := taskID(1, 1) + "_g1"
	luaTable{name: "begin_waits", script: loadScripts().begin,
		cases: []luaCase{
			{name: "wait: an await is delivered", seed: abc().awaits(1, "go").pendingAt(1),
				call: beginCall(1, taskID(1, 1), "tok"), reply: `["wait" "await"]`},
			{name: "wait: a sleep is the first step", seed: abc().sleeps(0, "sleep"),
				call: beginCall(0, taskID(0, 1), "tok"), reply: `["wait" "sleep"]`},
			{name: "wake: a sleep's time came", seed: abc().sleeps(1, "sleep").waitingAt(1, "timer", tNow),
				call: beginCall(1, wake, "tok"), reply: `["wake" "sleep"]`},
			{name: "wake: an await's timeout came", seed: abc().awaits(1, "go").waitingAt(1, "signal", tNow-5),
				call: beginCall(1, wake, "tok"), reply: `["wake" "await"]`},
			{name: "early: a sleep is never woken before its time",
				seed: abc().sleeps(1, "sleep").waitingAt(1, "timer", tNow+1),
				call: beginCall(1, wake, "tok"), reply: `["early" "1"]`},
			{name: "stale: the step's task from before it waited, with the wake-up to make sure of",
				seed: abc().sleeps(1, "sleep").waitingAt(1, "timer", tNow+1000),
				call: beginCall(1, taskID(1, 1), "tok"), reply: `["stale" "1" "b" "1" "1" "1800000001000" "60000"]`},
			{name: "stale: a step's task after its await succeeded",
				seed: abc().awaits(1, "go").pendingAt(2), call: beginCall(1, wake, "tok"),
				reply: `["stale" "2" "c" "1" "0" "0" "60000"]`},
		},
	}.run(t)
}

// waitCall is a wait (action start or wake) of step idx for the delivery
// of task, predicting the wake-up predicted ("" for none).
func waitCall(action string, idx int, task, until, untilErr, predicted string) waitLua {
	return waitLua{runArgs: tr, WakeTask: taskKey(predicted), Pending: tk.asynqPending(),
		Scheduled: tk.asynqScheduled(), Action: action, Index: idx, Task: task, Retention: tKeep, Until: until,
		UntilError: untilErr, WakeID: predicted, WakeMsg: []byte("MSG")}
}

func TestScriptWait(t *testing.T) {
	wake1 := taskID(1, 1) + "_g1"
	c := func(name string, seed *world, action string, idx int, task, until, untilErr, predicted, reply string) luaCase {
		return luaCase{name: name, seed: seed, call: waitCall(action, idx, task, until, untilErr, predicted), reply: reply}
	}
	luaTable{name: "wait", script: loadScripts().wait,
		cases: []luaCase{
			c("noop: run gone", nothing(), "start", 0, taskID(0, 1), "", "", "", `["noop" "run gone"]`),
			c("noop: run cancelled", abc().awaits(1, "go").cancelledAt(1), "start", 1, taskID(1, 1), "", "", "",
				`["noop" "run cancelled"]`),
			c("noop: a step with a body", abc().pendingAt(1), "start", 1, taskID(1, 1), "", "", "",
				`["noop" "state moved on"]`),
			c("noop: another task", abc().awaits(1, "go").pendingAt(1), "start", 1, taskID(1, 2), "", "", "",
				`["noop" "state moved on"]`),
			c("noop: started already", abc().awaits(1, "go").waitingAt(1, "signal", tNow+60000), "start", 1, wake1, "", "", "",
				`["noop" "step waiting"]`),
			c("waiting: an await, its wake-up written", abc().awaits(1, "go").pendingAt(1), "start", 1, taskID(1, 1), "", "",
				wake1, `["waiting" "signal" "1800000060000" "1" "b" "1" "1" "60000" "1"]`),
			c("waiting: an await, its wake-up not predicted", abc().awaits(1, "go").pendingAt(1), "start", 1, taskID(1, 1),
				"", "", "", `["waiting" "signal" "1800000060000" "1" "b" "1" "1" "60000" "0"]`),
			c("waiting: a sleep that is the first step starts the run", abc().sleeps(0, "sleep"), "start", 0, taskID(0, 1),
				"", "", taskID(0, 1)+"_g1", `["waiting" "timer" "1800000060000" "0" "a" "1" "1" "60000" "1"]`),
			c("waiting: a sleep until a computed time", abc().sleeps(1, "sleep_until").pendingAt(1), "start", 1,
				taskID(1, 1), "1800000500000", "", wake1, `["waiting" "timer" "1800000500000" "1" "b" "1" "1" "60000" "1"]`),
			c("next: a sleep until a time that has passed", abc().sleeps(1, "sleep_until").pendingAt(1), "start", 1,
				taskID(1, 1), "1799999000000", "", wake1, `["next" "2" "c" "1" "60000" "0"]`),
			c("failed: the time to sleep until cannot be computed", abc().sleeps(1, "sleep_until").pendingAt(1), "start", 1,
				taskID(1, 1), "", "input has no send_at", wake1,
				`["failed" "permanent_error" "step \"b\": cannot tell when to sleep until: input has no send_at" ""]`),
			c("next: an await finds its signal in the mailbox",
				abc().awaits(1, "go").pendingAt(1).queued("other", "", `1`).queued("go", "s1", `{"ok":true}`).queued("go", "s2", `2`),
				"start", 1, taskID(1, 1), "", "", wake1, `["next" "2" "c" "1" "60000" "0"]`),
			c("next: a recovered await finds its signal and leaves a stale waiting entry",
				abc().awaits(1, "go").pendingAt(1).zadd(tk.waiting(WaitSignal), tAttempt, tRun).
					zadd(tk.scheduled(), tAttempt, tRun).queued("go", "", `1`),
				"start", 1, taskID(1, 1), "", "", wake1, `["next" "2" "c" "1" "60000" "0"]`),
			c("succeeded: the last step's await finds its signal",
				abc().awaits(2, "go").pendingAt(2).queued("go", "", `"yes"`).idem(),
				"start", 2, taskID(2, 1), "", "", "", `["succeeded"]`),
			c("early: a wake-up before its time", abc().sleeps(1, "sleep").waitingAt(1, "timer", tNow+1), "wake", 1, wake1,
				"", "", "", `["early" "1"]`),
			c("noop: a wake-up of a step that is not waiting", abc().sleeps(1, "sleep").pendingAt(1), "wake", 1, taskID(1, 1),
				"", "", "", `["noop" "step pending"]`),
			c("next: a sleep's time came", abc().sleeps(1, "sleep").waitingAt(1, "timer", tNow), "wake", 1, wake1,
				"", "", "", `["next" "2" "c" "1" "60000" "0"]`),
			c("succeeded: the last step's sleep", abc().sleeps(2, "sleep").waitingAt(2, "timer", tNow), "wake", 2,
				taskID(2, 1)+"_g1", "", "", "", `["succeeded"]`),
			c("failed: an await timed out", abc().awaits(1, "go").waitingAt(1, "signal", tNow), "wake", 1, wake1,
				"", "", "", `["failed" "signal_timeout" "step \"b\": no signal \"go\" within 60s (its await timeout)" ""]`),
		},
	}.run(t)
}

func TestScriptSignal(t *testing.T) {
	c := func(name string, seed *world, sig, payload, id, reply string) luaCase {
		return luaCase{name: name, seed: seed, call: signalLua{runArgs: tr, Name: sig, Payload: payload, SignalID: id,
			Retention: tKeep, MaxPending: 2}, reply: reply}
	}
	luaTable{name: "signal", script: loadScripts().signal,
		cases: []luaCase{
			c("gone", nothing(), "go", "1", "", `["gone"]`),
			c("ended: a finished run", abc().awaits(1, "go").succeeded(), "go", "1", "", `["ended" "succeeded"]`),
			c("delivered: the waiting await succeeds, the next step is due",
				abc().awaits(1, "go").waitingAt(1, "signal", tNow+60000), "go", `{"ok":true}`, "s1",
				`["delivered" "b" "R1_s1_a1_g1" "2" "c" "1" "60000" "wf"]`),
			c("succeeded: the last step was the waiting await",
				abc().awaits(2, "go").waitingAt(2, "signal", tNow+60000).idem(), "go", `"yes"`, "",
				`["succeeded" "c" "R1_s2_a1_g1"]`),
			c("duplicate: an ID received before", abc().awaits(1, "go").waitingAt(1, "signal", tNow+60000).set("sig:s1", tAttempt),
				"go", `1`, "s1", `["duplicate"]`),
			c("queued: the await is not reached yet", abc().awaits(1, "go").runningAt(0, "tok"), "go", `1`, "s1",
				`["queued" "1"]`),
			c("queued: the current await waits for another signal",
				abc().awaits(1, "a1").awaits(2, "go").waitingAt(1, "signal", tNow+60000), "go", `1`, "", `["queued" "1"]`),
			c("full: the mailbox holds its maximum", abc().awaits(1, "go").queued("go", "", "1").queued("go", "", "2"),
				"go", `3`, "s3", `["full" "2"]`),
			c("refused: no step awaits the signal", abc().awaits(1, "go").runningAt(0, "tok"), "stop", `1`, "",
				`["refused" "no step of the run awaits signal \"stop\" from step \"a\" on"]`),
			c("refused: only an earlier step awaited it", abc().awaits(0, "go").done(1).pendingAt(1), "go", `1`, "",
				`["refused" "no step of the run awaits signal \"go\" from step \"b\" on"]`),
		},
	}.run(t)
}

func TestScriptRepairWaits(t *testing.T) {
	call := func(task, trouble string) repairLua {
		return repairLua{runArgs: tr, Task: task, Trouble: trouble, MaxAuto: 3}
	}
	wake := taskID(1, 1) + "_g1"
	luaTable{name: "repair_waits", script: loadScripts().repair,
		cases: []luaCase{
			{name: "repair: a waiting sleep's missing wake-up", seed: abc().sleeps(1, "sleep").waitingAt(1, "timer", tNow+5000),
				call: call(wake, "missing"), reply: `["repair" "1" "b" "1" "1" "1800000005000" "60000" "wake_task_missing" "wf"]`},
			{name: "repair: an await's archived wake-up", seed: abc().awaits(1, "go").waitingAt(1, "signal", tNow+5000),
				call: call(wake, "archived"), reply: `["repair" "1" "b" "1" "2" "1800000005000" "60000" "task_archived" "wf"]`},
		},
	}.run(t)
}

// A signal, a timeout, a cancel and a deadline take the run out of the
// waiting and scheduled indexes.
func TestWaitingIndexesFollowTheStep(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t, nil).Client(t)
	ctx := context.Background()
	s := loadScripts()
	for _, c := range []struct {
		name   string
		seed   *world
		script *redis.Script
		call   luaArgs
		reason WaitReason
	}{
		{"signal", abc().awaits(1, "go").waitingAt(1, "signal", tNow+60000), s.signal,
			signalLua{runArgs: tr, Name: "go", Payload: "1", Retention: tKeep, MaxPending: 100}, WaitSignal},
		{"timeout", abc().awaits(1, "go").waitingAt(1, "signal", tNow), s.wait,
			waitCall("wake", 1, taskID(1, 1)+"_g1", "", "", ""), WaitSignal},
		{"timer", abc().sleeps(1, "sleep").waitingAt(1, "timer", tNow), s.wait,
			waitCall("wake", 1, taskID(1, 1)+"_g1", "", "", ""), WaitTimer},
		{"cancel", abc().sleeps(1, "sleep").waitingAt(1, "timer", tNow+60000), s.cancel,
			cancelLua{runArgs: tr, Actor: "x", Retention: tKeep}, WaitTimer},
		{"deadline", abc().sleeps(1, "sleep").waitingAt(1, "timer", tNow+60000).set("deadline", tNow).
			zadd(tk.deadlines(), tNow, tRun), s.timeout, timeoutLua{runArgs: tr, Retention: tKeep}, WaitTimer},
	} {
		if err := rdb.FlushDB(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		for _, cmd := range c.seed.cmds {
			if err := rdb.Do(ctx, cmd...).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if n := rdb.ZCard(ctx, tk.waiting(c.reason)).Val(); n != 1 {
			t.Fatalf("%s: seed: %d runs wait for %s", c.name, n, c.reason)
		}
		keys, argv := c.call.args()
		if err := c.script.Run(ctx, rdb, keys, argv...).Err(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for _, idx := range []string{tk.waiting(c.reason), tk.scheduled()} {
			if err := rdb.ZScore(ctx, idx, tRun).Err(); !errors.Is(err, redis.Nil) {
				t.Errorf("%s: the run is still in %s (%v)", c.name, idx, err)
			}
		}
	}
}
