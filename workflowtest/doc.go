// Package workflowtest runs workflow definitions in unit tests: fast,
// deterministic, with no worker, no real waiting and no Redis server to set
// up.
//
// An Env holds an embedded store (an in-process Redis, private to the Env),
// a workflow.Engine with the definitions registered, a workflow.Client, and
// a fake clock that moves only when the test says so. No asynq server runs:
// the Env delivers the due step tasks to the engine itself, one at a time, in
// the order asynq would, so a test reaches every state on purpose:
//
//	env := workflowtest.New(t, orderWorkflow())
//	env.FailStep("charge", 1, workflow.Transient(errors.New("gateway timeout")))
//
//	run, err := env.Start("order", Order{ID: 42}, nil) // runs until nothing is due
//	// ... attempt 1 of charge failed; its retry waits for the backoff.
//	err = env.Advance(time.Second) // the fake clock moves; the retry runs
//	env.RequireStatus(t, run.ID, workflow.StatusSucceeded)
//
// Time: everything Cairn decides by time (retry backoffs, snoozes, sleep
// steps, await timeouts, run deadlines, circuit breakers, journal timestamps)
// reads the Env's fake clock, which starts at DefaultStart (or
// Options.Start). Advance and AdvanceTo move it, stopping at each moment
// something falls due to run it then, so timestamps and backoffs come out as
// in production; RunUntilDone skips ahead from one due moment to the next
// until a run ends. Nothing waits in real time.
//
// Failures: FailStep, OnAttempt and OnStep replace the body of a step (or of
// a compensation, named "compensate:<step>") for one attempt or for all of
// them, so retries, permanent failures and sagas can be tested without
// mocking the services the steps call.
//
// Assertions: Get, Events and Output read a run, its journal and its step
// outputs; RequireStatus, RequireOutput and RequireEvent fail the test when
// they do not hold. Client returns the workflow.Client for everything else
// (signals with options, cancels, operator actions, listings).
//
// What the kit does not simulate: a step body runs for real, so a step that
// calls time.Sleep or a real service takes that long (a test should stub it
// with OnStep); its context's deadline (the step timeout or the run's
// deadline) is measured in real time from when the attempt starts, and a
// Cancel of its run while it runs does not end its context (the engine
// discards the body's result when it returns). Workers crashing, Redis outages, asynq's
// own redeliveries and webhooks are not simulated: the tests of package
// workflow cover them. Finished runs do not expire (retention is not
// applied by the embedded store).
package workflowtest
