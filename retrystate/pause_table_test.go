package retrystate

// Table tests of pause and resume (lua/pause.lua) and of what a paused run
// changes in the scripts that begin, complete and repair: as
// scripts_table_test.go's, each with its golden file.

import "testing"

// paused marks the run paused by alice a second before tNow ("1"), or
// paused with a dispatch parked (how "parked").
func (w *world) paused(how string) *world {
	return w.set("paused", how, "paused_at", tNow-1000, "paused_by", "alice").zadd(tk.paused(), tCreated, tRun)
}

// asynqHolds writes asynq's record of task id, in state.
func (w *world) asynqHolds(id, state string) *world {
	return w.do("HSET", taskKey(id), "msg", "MSG", "state", state)
}

func TestScriptPause(t *testing.T) {
	call := func(action string) pauseLua { return pauseLua{runArgs: tr, Action: action, Actor: "bob"} }
	luaTable{name: "pause", script: loadScripts().pause,
		cases: []luaCase{
			{name: "gone", seed: nothing(), call: call("pause"), reply: `["gone"]`},
			{name: "pause: a running run", seed: abc().runningAt(1, "tok"), call: call("pause"), reply: `["paused"]`},
			{name: "pause: a pending run", seed: abc(), call: call("pause"), reply: `["paused"]`},
			{name: "pause: twice changes nothing", seed: abc().runningAt(1, "tok").paused("1"), call: call("pause"),
				reply: `["noop" "already paused"]`},
			{name: "pause: refused for a terminal run", seed: abc().succeeded(), call: call("pause"),
				reply: `["ended" "succeeded"]`},
			{name: "pause: refused for a failed run", seed: abc().failedAt(1), call: call("pause"),
				reply: `["ended" "failed"]`},
			{name: "resume: not paused changes nothing", seed: abc().runningAt(1, "tok"), call: call("resume"),
				reply: `["noop" "not paused"]`},
			{name: "resume: refused for a terminal run", seed: abc().cancelledAt(1).paused("1"), call: call("resume"),
				reply: `["ended" "cancelled"]`},
			{name: "resume: none parked, the attempt in flight goes on", seed: abc().runningAt(1, "tok").paused("1"),
				call: call("resume"), reply: `["resumed" "" "0"]`},
			{name: "resume: none parked, the pending task in asynq", seed: abc().pendingAt(1).paused("1").
				asynqHolds(taskID(1, 1), "pending"), call: call("resume"), reply: `["resumed" "" "0"]`},
			{name: "resume: a parked dispatch written again, due now", seed: abc().pendingAt(1).paused("parked"),
				call: call("resume"), reply: `["resumed" "R1_s1_a1" "0"]`},
			{name: "resume: a parked dispatch whose task asynq still holds gets a new one",
				seed: abc().pendingAt(1).paused("parked").asynqHolds(taskID(1, 1), "active"),
				call: call("resume"), reply: `["resumed" "R1_s1_a1_g1" "0"]`},
			{name: "resume: a parked await completed since by a signal: the next step's task is pending",
				seed: abc().pendingAt(2).paused("parked").asynqHolds(taskID(2, 1), "pending"),
				call: call("resume"), reply: `["resumed" "" "0"]`},
			{name: "resume: none parked, the task lost: written again", seed: abc().pendingAt(1).paused("1"),
				call: call("resume"), reply: `["resumed" "R1_s1_a1" "0"]`},
			{name: "resume: a parked retry keeps its due time", seed: abc().retryAt(0, tNow+5000).paused("parked"),
				call: call("resume"), reply: `["resumed" "R1_s0_a2" "1800000005000"]`},
			{name: "resume: a parked retry whose time passed is due now", seed: abc().retryAt(0, tNow-5000).paused("parked"),
				call: call("resume"), reply: `["resumed" "R1_s0_a2" "0"]`},
			{name: "resume: a parked wake-up of a sleep", seed: abc().sleeps(1, "sleep").waitingAt(1, "timer", tNow+7000).
				paused("parked"), call: call("resume"), reply: `["resumed" "R1_s1_a1_g1" "1800000007000"]`},
		},
	}.run(t)
}

func TestScriptBeginPaused(t *testing.T) {
	luaTable{name: "begin_paused", script: loadScripts().begin,
		cases: []luaCase{
			{name: "paused: the first attempt is parked", seed: abc().paused("1"),
				call: beginCall(0, taskID(0, 1), "tok"), reply: `["paused"]`},
			{name: "paused: a middle step, parked again", seed: abc().pendingAt(1).paused("parked"),
				call: beginCall(1, taskID(1, 1), "tok"), reply: `["paused"]`},
			{name: "paused: a retry delivered early is parked with its due time",
				seed: abc().retryAt(0, tNow+2000).paused("1"), call: beginCall(0, taskID(0, 2), "tok"), reply: `["paused"]`},
			{name: "paused: a sleep's wake-up is parked", seed: abc().sleeps(1, "sleep").waitingAt(1, "timer", tNow).
				paused("1"), call: beginCall(1, taskID(1, 1)+"_g1", "tok"), reply: `["paused"]`},
			{name: "paused: the in-flight attempt's begin asked again is ok", seed: abc().runningAt(1, "tok").paused("1"),
				call:  beginCall(1, taskID(1, 1), "tok"),
				reply: `["ok" "1" "0" "0" "{\"n\":1}" "{\"p\":\"b\"}" "1" "0" "c" "0" "60000" "a" "{\"out\":0}"]`},
			{name: "paused: a stale delivery asks for no task", seed: abc().pendingAt(1).paused("parked"),
				call: beginCall(0, taskID(0, 1), "tok"), reply: `["stale"]`},
			{name: "paused: a terminal run ended", seed: abc().cancelledAt(1).paused("1"),
				call: beginCall(1, taskID(1, 1), "tok"), reply: `["ended" "cancelled"]`},
		},
	}.run(t)
}

func TestScriptCompletePaused(t *testing.T) {
	luaTable{name: "complete_paused", script: loadScripts().complete,
		cases: []luaCase{
			inlineCase("paused: no inline begin, the next step's task written", abc().runningAt(0, "tok").paused("1"), 0,
				`["next" "1" "b" "1" "60000" "1"]`),
			completeCase("paused: the last step succeeds", abc().runningAt(2, "tok").paused("1"), 2, "tok", "",
				`["succeeded"]`),
		},
	}.run(t)
}

func TestScriptRepairPaused(t *testing.T) {
	luaTable{name: "repair_paused", script: loadScripts().repair,
		cases: []luaCase{
			{name: "check: a parked dispatch is left alone", seed: abc().pendingAt(1).paused("parked"),
				call: repairLua{runArgs: tr, Trouble: "check", MaxAuto: 3}, reply: `["noop" "paused"]`},
			{name: "missing: a paused run is left alone", seed: abc().retryAt(0, tNow-1).paused("parked"),
				call: repairLua{runArgs: tr, Task: taskID(0, 2), Trouble: "missing", MaxAuto: 3}, reply: `["noop" "paused"]`},
		},
	}.run(t)
}
