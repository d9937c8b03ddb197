package retrystate

import (
	"testing"

	"github.com/cairnhq/cairn/tasks"
)

// TestScriptRetryNow: retrynow.lua, an operator's "retry now" (the step's
// scheduled retry moved to asynq's pending list, due now) and the check of
// a delivery begin found early (asynq's RunTask, found by the timers
// index's entry it leaves). Every refusal and noop writes nothing.
func TestScriptRetryNow(t *testing.T) {
	const due = tNow + 60_000
	q := tasks.QueueKeys(tQueue)
	retryID := taskID(0, 2)
	operator := func(step string) retryNowLua {
		return retryNowLua{runArgs: tr, StepName: step, Actor: "alice"}
	}
	delivery := retryNowLua{runArgs: tr, Task: retryID, Actor: "asynq"}
	// scheduled is a run whose step a waits for its retry, due at due, its
	// task scheduled as fail.lua writes it (asynq's scheduled set at the
	// whole second, Cairn's timers index at the ms).
	scheduled := func() *world {
		return abc().retryAt(0, due).do("HSET", q.Task(retryID), "msg", "m", "state", "scheduled").
			zadd(q.Scheduled(), due/1000, retryID).zadd(q.Timers(), due, retryID)
	}
	// ran is scheduled after asynq's RunTask moved the task and a worker
	// took it: active, its timers entry left behind.
	ran := func() *world {
		return abc().retryAt(0, due).do("HSET", q.Task(retryID), "msg", "m", "state", "active").
			do("LPUSH", q.Active(), retryID).zadd(q.Timers(), due, retryID)
	}
	luaTable{name: "retrynow", script: loadScripts().retryNow,
		cases: []luaCase{
			{name: "gone", seed: nothing(), call: operator("a"), reply: `["gone"]`},
			{name: "due: the scheduled retry's task moves to pending", seed: scheduled(), call: operator("a"),
				reply: `["due" "0" "a" "2" "1800000060000" "scheduled"]`},
			{name: "due: a retry in asynq's retry set moves too",
				seed: abc().retryAt(0, due).do("HSET", q.Task(retryID), "msg", "m", "state", "retry").
					zadd(q.Retry(), due/1000, retryID).zadd(q.Timers(), due, retryID),
				call: operator("a"), reply: `["due" "0" "a" "2" "1800000060000" "retry"]`},
			{name: "due: a task pending already stays", seed: abc().retryAt(0, due).
				do("HSET", q.Task(retryID), "msg", "m", "state", "pending").do("LPUSH", q.Pending(), retryID),
				call: operator("a"), reply: `["due" "0" "a" "2" "1800000060000" "pending"]`},
			{name: "due: a missing task is left to the reconciler", seed: abc().retryAt(0, due), call: operator("a"),
				reply: `["due" "0" "a" "2" "1800000060000" ""]`},
			{name: "refused: a delivery holds the task", seed: ran(), call: operator("a"),
				reply: `["refused" "a delivery of step \"a\"'s task holds it (it came early and waits); try again in a few seconds"]`},
			{name: "refused: the retry is due already", seed: abc().retryAt(0, tNow), call: operator("a"),
				reply: `["refused" "the retry of step \"a\" is due already"]`},
			{name: "refused: a running step", seed: abc().runningAt(1, "tok"), call: operator("b"),
				reply: `["refused" "step \"b\" is running, not waiting out a retry's backoff"]`},
			{name: "refused: a snoozed step", seed: abc().pendingAt(1).step(1, "next_attempt_at", due, "resuming", "snoozed",
				"retry_state", "scheduled"), call: operator("b"),
				reply: `["refused" "step \"b\" is snoozed: its body asked to run again then, not waiting out a retry's backoff"]`},
			{name: "refused: a retry its circuit breaker deferred", seed: abc().retryAt(0, due).set("warning", "breaker_open"),
				call:  operator("a"),
				reply: `["refused" "step \"a\" is deferred by its open circuit breaker, not waiting out a retry's backoff"]`},
			{name: "refused: a step waiting for its first attempt", seed: abc().pendingAt(1), call: operator("b"),
				reply: `["refused" "step \"b\" is pending without a scheduled retry, not waiting out a retry's backoff"]`},
			{name: "refused: another step", seed: scheduled(), call: operator("b"),
				reply: `["refused" "step \"b\" is not waiting out a retry's backoff; the run is at step \"a\""]`},
			{name: "refused: a paused run", seed: scheduled().set("paused", "1"), call: operator("a"),
				reply: `["refused" "run is paused; resume it first (its retry then runs at its due time, or retry now after the resume)"]`},
			{name: "noop: a paused run's delivery (begin parks it)", seed: ran().set("paused", "parked"), call: delivery,
				reply: `["noop" "run is paused; resume it first (its retry then runs at its due time, or retry now after the resume)"]`},
			{name: "refused: a failed run", seed: abc().failedAt(1), call: operator("b"),
				reply: `["refused" "run is failed; only a step waiting out a retry's backoff can be retried now"]`},
			{name: "due: asynq's RunTask, found at its delivery", seed: ran(), call: delivery,
				reply: `["due" "0" "a" "2" "1800000060000" "active"]`},
			{name: "noop: a delivery the promoter moved (no timers entry)",
				seed: abc().retryAt(0, due).do("HSET", q.Task(retryID), "msg", "m", "state", "active"), call: delivery,
				reply: `["noop" "delivered early, not by asynq's RunTask"]`},
			{name: "noop: a delivery less than a second early", seed: abc().retryAt(0, tNow+999).
				do("HSET", q.Task(retryID), "msg", "m", "state", "active").zadd(q.Timers(), tNow+999, retryID),
				call: delivery, reply: `["noop" "delivered early, not by asynq's RunTask"]`},
			{name: "noop: a delivery of another task", seed: ran(),
				call: retryNowLua{runArgs: tr, Task: taskID(0, 1), Actor: "asynq"}, reply: `["noop" "not the current step's task"]`},
			{name: "noop: a snooze's early delivery",
				seed: abc().pendingAt(1).step(1, "next_attempt_at", due, "resuming", "snoozed", "retry_state", "scheduled").
					zadd(q.Timers(), due, taskID(1, 1)),
				call:  retryNowLua{runArgs: tr, Task: taskID(1, 1), Actor: "asynq"},
				reply: `["noop" "step \"b\" is snoozed: its body asked to run again then, not waiting out a retry's backoff"]`},
			{name: "noop: a sleep's early wake-up", seed: abc().sleeps(1, "sleep").waitingAt(1, "timer", due).
				zadd(q.Timers(), due, taskID(1, 1)+"_g1"),
				call:  retryNowLua{runArgs: tr, Task: taskID(1, 1) + "_g1", Actor: "asynq"},
				reply: `["noop" "step \"b\" is waiting, not waiting out a retry's backoff"]`},
		},
	}.run(t)
}
