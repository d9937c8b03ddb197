// Package e2e holds Cairn's end-to-end tests: they build the real binaries,
// run them against real redis-server processes, kill them with SIGKILL and
// restart them, and check from Redis and the journals that nothing is lost.
package e2e
