// Package bench measures what Cairn's durability costs in throughput. It is
// the benchmark behind `make bench`:
//
//	go test -run '^$' -bench . -benchtime 1x -count 1 ./bench/
//
// Every benchmark runs against one redis-server for the whole run, a
// private one on a free loopback port (internal/redistest), each phase on a
// queue of its own.
//
// BenchmarkStepThroughput is the main one. It runs two phases with the same
// asynq server settings (the polling intervals the Cairn worker uses by
// default):
//
//   - raw asynq: chains of 3 no-op tasks, each task enqueueing the next;
//   - Cairn: runs of a workflow of 3 no-op steps on a workflow.Worker.
//
// It reports raw asynq tasks/s, Cairn steps/s and their ratio (the target is
// at least 0.5), and per task and per step: Redis commands as the server
// counts them (INFO commandstats, so the commands Lua scripts call are
// included; the benchmark's own INFO, CONFIG and polling calls are
// subtracted), round trips as the client counts them, the CPU time of
// redis-server and of the Go process, and the mean latency of asynq's
// dequeue. Only the processing is timed and counted: chain heads and runs
// are enqueued and started before the clock and the counters start. It
// prints a table of all this, and whether the ratio meets the target.
//
// BenchmarkStepThroughputAsynqDefaults repeats both phases with asynq's own
// polling intervals (TaskCheckInterval 1s, DelayedTaskCheckInterval 5s),
// which the Cairn worker overrides, with a busy queue (more chains than
// the concurrency) and with a sparse one (a single chain, so the queue runs
// dry after every task); BenchmarkStepThroughputSparse is the reference for
// the sparse one. BenchmarkStart measures
// Client.Start against a bare asynq enqueue.
//
// BenchmarkRunLatency measures one run of 3 no-op steps at a time on an idle
// worker, from before Client.Start to the run's end (an observer hook), for
// the default execution and inline continuation: p50 and p99 of
// CAIRN_BENCH_LATENCY_RUNS runs (default 100).
//
// BenchmarkScale (make bench-scale, skipped by make bench) runs the worker
// binary as processes: 1, 2 and 4 of them on one Redis, then one queue and
// three queues (one per master) on a 3-master Redis Cluster, and reports
// steps/s, the CPU per step of the workers and of Redis, and the commands
// and the CPU of each Redis node (CAIRN_BENCH_SCALE_RUNS runs per queue,
// default 2000).
//
// BenchmarkScriptInstructions runs redis-server under valgrind's callgrind
// and reports the instructions it executes per begin and per complete
// script: a measure of the scripts' cost that, unlike time, the machine's
// load does not move, for judging a change to a script. It needs valgrind
// (apt-get install -y valgrind); CAIRN_BENCH_COST_RUNS sets its runs
// (default 200).
//
// Environment:
//
//	CAIRN_BENCH_CHAINS           chains (runs) per phase of BenchmarkStepThroughput; default 1000
//	CAIRN_BENCH_DEFAULTS_CHAINS  chains of BenchmarkStepThroughputAsynqDefaults/busy; default 200
//	CAIRN_BENCH_SPARSE_CHAINS    chains of the sparse benchmarks; default 1
//	CAIRN_BENCH_DEFAULTS=0       skips BenchmarkStepThroughputAsynqDefaults and ...Sparse
//	CAIRN_BENCH_CONCURRENCY      asynq concurrency of every phase; default 10
//	CAIRN_BENCH_SERVERS          asynq servers (Cairn workers) per phase, sharing the concurrency; default 1
//
// With -benchtime Nx each phase runs N times, alternating, and the figures
// are the totals. With -v, each phase also prints its commands by name
// (server side), its round trips by command or script (client side, with
// the latency the client saw) and the execution time of each command and
// script (server side, from SLOWLOG, which the benchmark turns on for the
// phase). With -cpuprofile, samples carry the label phase=raw, cairn,
// raw-setup or cairn-setup (go tool pprof -tagfocus 'phase=^cairn$').
package bench
