// Package proctest builds the project's binaries and runs them as child
// processes in tests, typically crash/restart tests that kill -9 a process
// and check what survives.
//
// [Build] compiles a package once per test binary and returns the path of
// the executable. [Start] runs it in its own process group, recording its
// combined stdout and stderr, which tests wait on with
// [Proc.WaitForOutput] and [Proc.WaitForOutputFrom] (polling with a
// deadline, never sleeping). [Proc.Kill] sends SIGKILL to the whole process
// group. Every process is killed by a t.Cleanup when the test ends, and if
// the test failed the tail of its output is logged. [Run] runs a command to
// completion, for CLI tests.
//
// Built binaries are kept in a per-process directory under os.TempDir();
// call [RemoveBuilds] from TestMain after m.Run to delete it.
//
// Set CAIRN_TEST_BUILD_RACE=1 to build the binaries with the race detector.
//
// The package is Linux-only: children get SIGKILL if the test binary dies
// (Pdeathsig), so stray processes do not outlive an interrupted test run.
package proctest
