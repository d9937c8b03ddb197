// Package workerapp is the worker command, Cairn's worker binary: it runs
// workflows, executing their step attempts from the queue, with the demo
// workflow registered. Configuration comes from the environment
// (docs/configuration.md). With CAIRN_REDIS_URL unset it starts the
// embedded, non-durable development store. It also serves the HTTP API and
// dashboard (package dashboard) on CAIRN_HTTP_ADDR; with --dashboard-only
// it serves only those. With --healthcheck it asks the server of a running
// worker or dashboard on this host whether it is ready, and exits 0 or 1
// (a container's health check). worker --help lists the flags.
//
// cmd/worker is a thin main around [Main], which takes its arguments,
// standard streams and environment as parameters, so the command runs
// in-process in tests.
package workerapp
