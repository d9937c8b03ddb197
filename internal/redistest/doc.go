// Package redistest runs real redis-server processes for tests.
//
// Every server started with [Start] is a private redis-server process
// listening on a free loopback port, with its data directory in
// t.TempDir(). Tests can kill it with SIGKILL ([Server.Kill]), stop it
// gracefully ([Server.Stop]) and bring it back on the same port with the
// same data directory and configuration ([Server.Restart]), which is what
// crash and durability tests need. The process is killed by a t.Cleanup
// when the test ends.
//
// For tests that only need "a Redis", [Shared] returns one server per test
// binary, started lazily on first use. Tests using it must not assume an
// empty database and should use their own keys (for example prefixed with
// t.Name()). Register [Main] in TestMain so the shared server is stopped
// when the tests finish:
//
//	func TestMain(m *testing.M) { redistest.Main(m) }
//
// or, when TestMain has more to do, call [StopShared] after m.Run.
//
// The redis-server binary is located through the CAIRN_REDIS_SERVER
// environment variable, then PATH, then /usr/bin/redis-server and
// /usr/local/bin/redis-server. If none is found the test fails (it is never
// skipped): Redis is a hard requirement of the test suite.
//
// The package is Linux-only: servers run in their own process group and
// receive SIGKILL if the test binary dies (Pdeathsig), so stray servers do
// not outlive an interrupted test run.
package redistest
