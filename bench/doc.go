// Package bench measures what Cairn's durability costs in throughput, in
// Redis memory and at scale. It is the benchmark behind `make bench`:
//
//	go test -run '^$' -bench . -skip '^BenchmarkScale$' -benchtime 1x -count 1 ./bench/
//
// The throughput benchmarks run against one redis-server for the whole run,
// a private one on a free loopback port (internal/redistest), each phase on
// a queue of its own; BenchmarkReconcileRetries, BenchmarkRetainedRuns,
// BenchmarkScriptInstructions and the floors start private servers of
// their own. Every figure is printed with the machine's load
// average (/proc/loadavg) at the time: on a shared machine, throughput
// moves with it. When the run ends, a table puts each figure that has a
// target of the lean step path (targets_test.go: instructions per step and
// per create, the end-to-end ratios, bytes per run, run latency, timer
// lateness, kill -9 to resume) next to its target, met or not.
//
// BenchmarkStepThroughput is the main one. It compares, end to end, with
// the same asynq server settings (the polling intervals the Cairn worker
// uses by default):
//
//   - raw asynq: chains of 3 no-op tasks, each task enqueueing the next;
//   - Cairn: runs of a workflow of 3 no-op steps on a workflow.Worker, in
//     each variant of the definition (mainVariants: "strict", the default,
//     and any other, each a name and a change to the definition).
//
// The servers (workers) run in the process and have taken a warm-up chain
// (run) through before the clock starts. The clock starts before the first
// chain head is enqueued (the first run is started, Client.Start, 8 at a
// time) and stops when an in-process hook sees the last chain's last task
// (the last run) done: the raw chain's last handler, the Cairn engine's
// Observer.RunFinished. The phases alternate for CAIRN_BENCH_ROUNDS rounds
// (default 5), raw first. It prints a table of tasks/s and steps/s and, per
// task and per step: Redis commands as the server counts them (INFO
// commandstats, so the commands Lua scripts call are included; the
// benchmark's own INFO, CONFIG and SCAN calls are subtracted), round trips
// as the client counts them, the CPU time of redis-server and of the Go
// process, and the mean latency of asynq's dequeue; the starts are in every
// figure. Then, for each Cairn variant, a line
//
//	ratio <variant> <median>
//
// with the median over the rounds of Cairn steps/s / raw asynq tasks/s
// (the targets: strict at least 0.7, inline at least 1.5; targets_test.go),
// and a line
//
//	bytes/run <variant> <bytes>
//
// with the Redis memory a finished run keeps: once the phase's workers have
// stopped, MEMORY USAGE <key> SAMPLES 0 of every key of the phase's queue
// (SCAN of cairn:{q}:* and asynq:{q}:*). A key whose name holds a run ID is
// that run's (run hash, journal, mailbox, a task asynq kept); the other keys
// are shared (indexes, definitions, the notification stream, asynq's
// counters), and a run's share is their size divided by the runs (each
// index holds every run of the queue once, so that is an index's size
// divided by its members). The line breaks the total down into run hash,
// journal, indexes and the rest, then lists each key shape's bytes per run,
// and the growth of INFO used_memory over the phase as a check.
//
// BenchmarkStepThroughputProcessing is the same comparison with only the
// processing timed and counted, as the benchmark measured before it was
// end to end: the chain heads are enqueued and the runs started before the
// clock and the counters start; the clock starts with the servers (workers)
// and stops on the same hooks. CAIRN_BENCH_PROCESSING_ROUNDS rounds
// (default 3).
//
// BenchmarkStepThroughputAsynqDefaults repeats both phases (processing
// only) with asynq's own polling intervals (TaskCheckInterval 1s,
// DelayedTaskCheckInterval 5s), which the Cairn worker overrides, with a
// busy queue (more chains than the concurrency) and with a sparse one (a
// single chain, so the queue runs dry after every task);
// BenchmarkStepThroughputSparse is the reference for the sparse one.
// BenchmarkStart measures Client.Start against a bare asynq enqueue, one
// call at a time.
//
// BenchmarkReconcileRetries measures the reconciler at scale: it seeds
// CAIRN_BENCH_RECONCILE_RUNS runs (default 100,000) through the real paths
// (Client.Start, Store.Begin, Store.Fail with a transient error), each with
// a retry scheduled and its asynq task missing, an hour in the past, then
// calls Reconciler.Pass until every retry's task exists, and prints the
// time on a line "reconcile <n> retries <time>" (the target: at most 10 s
// for 100,000), each pass, and per repair the commands, round trips and CPU
// time of Redis and of the Go side (-v: by command and script; -cpuprofile:
// samples labelled phase=reconcile); then the time of one more pass a
// minute later, every task there (the steady state), and its CPU per run
// checked. CAIRN_BENCH_RECONCILE_CONCURRENCY sets
// the reconciler's Concurrency (default 5, ReconcilerConfig's; the pass's
// task checks, 200 runs to a pipeline, do not depend on it).
//
// BenchmarkRetainedRuns shows whether finished runs kept for the retention
// slow the step path: it seeds CAIRN_BENCH_RETAINED_RUNS finished runs
// (default 100,000; 1,000,000 for the full figure, about 0.7 GB of Redis
// memory and a minute) in one queue with a Lua script (minimal run hashes,
// their idx:all and idx:status:succeeded entries, the notification stream
// at its cap), then for CAIRN_BENCH_RETAINED_ROUNDS rounds (default 3)
// runs an end-to-end Cairn phase of CAIRN_BENCH_RETAINED_CHAINS runs
// (default 3000) on a fresh queue and on the queue with the retained runs,
// and times every call of a run's life one at a time (Client.Start, each
// step's begin and complete; CAIRN_BENCH_RETAINED_DIRECT runs, default
// 1000) on both, in Redis (SLOWLOG) and at the client. It prints the
// steps/s ratio on a line "retained <n> steps/s ratio <median>", the memory
// the seeded runs take, and how long the reconciler takes to trim their
// index entries once their hashes are gone (as after their expiry).
//
// BenchmarkRunLatency measures one run of 3 no-op steps at a time on an idle
// worker, from before Client.Start to the run's end (an observer hook), for
// the default execution and inline continuation: p50 and p99 of
// CAIRN_BENCH_LATENCY_RUNS runs (default 100).
//
// BenchmarkTimerLateness measures how late a 150ms retry and a 150ms sleep
// start after their due time on an idle worker, from the run's journal:
// p50, p99 and max of CAIRN_BENCH_TIMER_RUNS runs each (default 20), for
// the retry's attempt, the sleep's timer and the step after the sleep.
//
// BenchmarkJournalForms measures, with callgrind and MEMORY USAGE, what an
// append to a run's journal costs and how much a run's journal keeps, in
// each form issue 26 allows: a stream (today), a list, a string, fields of
// the run hash.
//
// BenchmarkFunctionCall measures, with callgrind, what a Redis 7 function
// (FCALL) costs against a script (EVALSHA): an empty body, and one with the
// helpers a script recreates on every call.
//
// BenchmarkLuaCosts measures, with callgrind, what each operation a script
// is made of costs Redis (a script call, its arguments, a concatenation, a
// number formatted, a closure, a table insert; HMGET, HSET, HGETALL, COPY,
// DUMP and RESTORE on a 3-step run's hash as a hash table and as a
// listpack; XADD, ZADD): the cost model of the run record's layout.
//
// BenchmarkPickup measures how long a task waits on an idle fetcher before
// its handler starts, with asynq's polling fetch loop and with a prototype
// that blocks on the pending list (the question behind a dequeue of
// Cairn's own), and each one's idle commands per second.
//
// BenchmarkIdleWorker measures what a worker with no runs costs Redis, per
// second: CPU time and commands, with nothing connected, with a raw asynq
// server at the worker's polling intervals, and with a Cairn worker.
//
// BenchmarkKillResume measures how soon a step whose worker is killed
// (SIGKILL) begins again on another worker: two worker processes (the
// cmd/worker binary, its defaults) on one queue, a run whose first step
// blocks, the kill of the worker running it at a random point of its
// fence's renewal cycle, and the time from the kill to the resumed
// attempt's attempt_started entry (resumed=1) on the other worker, with
// when the fence expired and when the sweep found the crash; p50 and max of
// CAIRN_BENCH_KILL_ROUNDS rounds (default 6), reported as
// ms_kill_to_resume and ms_kill_to_resume_max. The workers take the
// benchmark's CAIRN_* environment: CAIRN_FENCE_TTL=10s
// CAIRN_SWEEP_INTERVAL=2s measures the defaults before issue 26.
// BenchmarkFenceCost prices the fence in Redis instructions (callgrind, as
// BenchmarkScriptInstructions below; it needs valgrind): a renewal
// (renew.lua), and a sweep with nothing due now (one read, no lock) and
// before (under the lock), per call and per second with the defaults.
//
// BenchmarkScale (make bench-scale, skipped by make bench) runs the worker
// binary as processes: 1, 2 and 4 of them on one Redis, then one queue and
// three queues (one per master) on a 3-master Redis Cluster, and reports
// steps/s, the CPU per step of the workers and of Redis, and the commands
// and the CPU of each Redis node (CAIRN_BENCH_SCALE_RUNS runs per queue,
// default 2000).
//
// BenchmarkScriptInstructions runs redis-server under valgrind's callgrind
// and reports the instructions it executes per create, begin and complete
// script of a strict run and of an inline one, and per check of a
// scheduled retry by the reconciler (one that repairs its missing task, and
// one of it healthy): a measure of the scripts' cost that, unlike time, the
// machine's load does not move, for judging a change to a script. For
// comparison it measures raw asynq's own work for a task (enqueue; dequeue
// and done), and prints Cairn's per step with the dequeue and done of its
// task against it. BenchmarkScriptFloor measures the same way a stripped-down
// begin and complete that only take the fence and checkpoint: the floor
// under Cairn's scripts (docs/performance.md). BenchmarkScriptLeanFloor
// measures the least a create, a strict step and an inline step could cost
// with every design issue 26 allows at once (a run record of what changes,
// a journal list of compact entries, the dequeue and the begin in one
// script, a checkpoint that acknowledges its task) and no feature beyond
// the fence and the checkpoint: the lower bound under the targets. All
// three need valgrind (apt-get install -y valgrind); CAIRN_BENCH_COST_RUNS
// sets their runs (default 200).
//
// Environment:
//
//	CAIRN_BENCH_CHAINS                 chains (runs) per phase of BenchmarkStepThroughput and ...Processing; default 3000
//	CAIRN_BENCH_ROUNDS                 rounds of BenchmarkStepThroughput; default 5
//	CAIRN_BENCH_PROCESSING_ROUNDS      rounds of BenchmarkStepThroughputProcessing; default 3
//	CAIRN_BENCH_DEFAULTS_CHAINS        chains of BenchmarkStepThroughputAsynqDefaults/busy; default 200
//	CAIRN_BENCH_LUA_CALLS              calls of each snippet of BenchmarkLuaCosts; default 200
//	CAIRN_BENCH_SPARSE_CHAINS          chains of the sparse benchmarks; default 1
//	CAIRN_BENCH_DEFAULTS=0             skips BenchmarkStepThroughputAsynqDefaults and ...Sparse
//	CAIRN_BENCH_CONCURRENCY            asynq concurrency of every phase; default 10
//	CAIRN_BENCH_SERVERS                asynq servers (Cairn workers) per phase, sharing the concurrency; default 1
//	CAIRN_BENCH_RECONCILE_RUNS         scheduled retries of BenchmarkReconcileRetries; default 100000
//	CAIRN_BENCH_RECONCILE_CONCURRENCY  the reconciler's Concurrency there; default 5
//	CAIRN_BENCH_RETAINED_RUNS          finished runs BenchmarkRetainedRuns seeds; default 100000 (1000000: the full figure)
//	CAIRN_BENCH_RETAINED_ROUNDS        its rounds; default 3
//	CAIRN_BENCH_RETAINED_CHAINS        runs of each of its Cairn phases; default 3000
//	CAIRN_BENCH_RETAINED_DIRECT        runs it takes through their life one call at a time, per queue and round; default 1000
//	CAIRN_BENCH_SCALE_RUNS             runs per queue of BenchmarkScale; default 2000
//	CAIRN_BENCH_TIMER_RUNS             runs of each kind of BenchmarkTimerLateness; default 20
//	CAIRN_BENCH_PICKUP_TASKS           tasks of each fetcher in BenchmarkPickup; default 100
//	CAIRN_BENCH_IDLE_SECONDS           seconds each phase of BenchmarkIdleWorker measures; default 10
//	CAIRN_BENCH_KILL_ROUNDS            kills of BenchmarkKillResume; default 6
//	CAIRN_BENCH_COST_RUNS              runs of BenchmarkScriptInstructions, BenchmarkScriptFloor and BenchmarkScriptLeanFloor (calls of BenchmarkFenceCost); default 200
//
// With -benchtime Nx each throughput phase runs N times the rounds,
// alternating, and the figures are the totals. With -v, each phase also
// prints its commands by name (server side), its round trips by command or
// script (client side, with the latency the client saw) and the execution
// time of each command and script (server side, from SLOWLOG, which the
// benchmark turns on for the phase). With -cpuprofile, samples carry the
// label phase=raw, cairn, raw-start, cairn-start (the starts inside the
// clock), raw-setup, cairn-setup (before it), reconcile or reconcile-seed
// (go tool pprof -tagfocus 'phase=^cairn$').
package bench
