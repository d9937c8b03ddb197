// Package workerapp is the worker command, Cairn's worker binary: it runs
// workflows, executing their step attempts from the queue: those of
// CAIRN_WORKFLOWS_FILE, and the demo workflow on the embedded store or with
// CAIRN_DEMO. Configuration comes from the environment
// (docs/configuration.md). With CAIRN_REDIS_URL unset it starts the
// embedded, non-durable development store. It also serves the HTTP API and
// dashboard (package dashboard) on CAIRN_HTTP_ADDR; with --dashboard-only
// it serves only those. With --healthcheck it asks the server of a running
// worker or dashboard on this host whether it is ready, and exits 0 or 1
// (a container's health check). worker --help lists the flags.
//
// cmd/worker is a thin main around [Main], which takes its arguments,
// standard streams and environment as parameters, so the command runs
// in-process in tests. Two things stay process-wide: go-redis's logger
// (redis.SetLogger; the last Main to start wins) and the OTEL_*
// variables, which tracing reads from the process's environment, as the
// OpenTelemetry exporters do.
//
// # What the worker wires, in order, and what fails how
//
// Main parses the flags (flags.go: a usage error exits 2; --help and
// --version exit 0; --healthcheck, healthcheck.go, probes GET /readyz and
// exits 0 or 1, never 2, which Docker reserves) and loads the
// configuration (every bad variable named: exit 2). Then run (run.go)
// takes one step after another, each a function of its own:
//
//  1. newLogger: the log on stderr, with go-redis's messages in it.
//  2. What the operator named is checked or taken before anything starts,
//     so that a mistake leaves nothing behind: loadWorkflows reads
//     CAIRN_WORKFLOWS_FILE (its problems at FILE:LINE:COL: exit 2);
//     listenHTTP takes CAIRN_HTTP_ADDR (a set address that cannot be
//     listened on: exit 1; the default address: a warning, no HTTP).
//  3. startTracing, from OTEL_* (a value it cannot use: exit 2).
//  4. openRedis: the embedded store when CAIRN_REDIS_URL is unset (its
//     address in use: exit 1), then the client of the deployment the URL
//     names and the wait for replicas (connectRedis); then the metrics.
//  5. newDashboard, the HTTP server, if there is a listener (an unreadable
//     tokens file, or no tokens on an address that is not loopback: exit 2).
//  6. newWorker: workflow.NewWorker, the asynq server, engine, reconciler
//     and webhook notifier; registerWorkflows: the demo (on the embedded
//     store, or with CAIRN_DEMO or CAIRN_DEMO_CHAOS), the chaos and
//     ordering suites with CAIRN_DEMO_CHAOS, then the file's workflows (a
//     name already taken: exit 2; none at all on Redis: a warning).
//  7. serve: asynq's task format is checked (asynqwire.go; a difference:
//     exit 1, before anything is served). While Redis cannot be reached the
//     check goes on in the background, the worker waiting for Redis as it
//     does anyway, and a difference found then stops the worker (exit 1).
//     Then the HTTP server starts and workflow.Worker.Run runs until ctx is
//     done (SIGINT or SIGTERM: exit 0); first it checks the queue's data
//     format (a queue of another format: exit 1, with what to do,
//     docs/upgrading.md).
//
// Any other error exits 1. Shutting down undoes the steps in reverse:
// the worker's graceful stop (CAIRN_SHUTDOWN_TIMEOUT), then the HTTP
// server's, the Redis client, the embedded store, the export of the last
// spans (at most 5 s) and the listener.
//
// --dashboard-only (dashboardonly.go) refuses an empty CAIRN_HTTP_ADDR
// (exit 2), takes steps 1, 4 (connectRedis alone: with CAIRN_REDIS_URL
// unset it talks to the embedded store of a worker on this host), 3 and
// 5, and listens last: an address it cannot listen on, the default one
// too, exits 1. Then it serves until ctx is done.
//
// A start error that is the operator's to fix (a file, a token, a
// variable) is a startError (main.go): exit 2, as for a bad variable. The
// exit codes are those worker --help lists (flags.go).
package workerapp
