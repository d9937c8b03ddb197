// Package testkit holds the helpers the test suites share: polling for a
// condition ([Eventually]) or for what a test must set up before it acts
// ([Premise]), a per-test queue name ([Queue]) and logger ([Logger]), a
// free loopback address ([FreeAddr]), an in-process worker on a test's
// Redis ([StartWorker]), waiting for a run ([WaitRun]) and counting its
// events ([CountEvents]), skipping the slow tests under -short
// ([SkipShort]), recognising a run's creation in a Redis hook
// ([IsRunCreate]) and a TestMain that checks for leaked goroutines ([Main]).
//
// It is imported by tests only (and by the e2e tests' helper programs).
// Since it imports package workflow, the internal (package workflow) tests
// of workflow and of the packages workflow imports cannot use it; their
// external (_test) packages can.
package testkit
