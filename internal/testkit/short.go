package testkit

import "testing"

// SkipShort skips t under `go test -short`, saying what the test needs
// (for example "builds and runs the worker binary") and how to run it.
// Outside -short it does nothing: a test that needs a tool it cannot find
// then fails, with the command installing it.
func SkipShort(t testing.TB, needs string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("skipped under -short: this test %s; run it without -short (make test runs everything)", needs)
	}
}
