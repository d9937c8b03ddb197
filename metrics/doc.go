// Package metrics exposes Cairn's Prometheus metrics. [New] registers the
// collectors and returns a [Metrics], which implements workflow.Observer: set
// it as the Observer of the EngineConfig (the reconciler inherits it) and of
// a ClientConfig, and serve [Metrics.Handler] at /metrics.
//
// Counters and histograms count what this process did (sum them over the
// workers):
//
//	cairn_runs_started_total{workflow}                  first attempt of a run began
//	cairn_runs_finished_total{workflow,status,code}     succeeded, failed (code: the failure code), cancelled,
//	                                                    compensated (code: the failure that started its
//	                                                    compensations)
//	cairn_step_attempts_total{workflow,step,outcome}    succeeded, failed_transient, failed_permanent,
//	                                                    exhausted, crashed, ignored, discarded, interrupted,
//	                                                    deferred, snoozed, goto; a compensation's attempts
//	                                                    under step "compensate:<step>"
//	cairn_retries_scheduled_total{workflow,step}
//	cairn_retry_delay_seconds{workflow}                 histogram of scheduled retry delays
//	cairn_step_duration_seconds{workflow,step}          histogram of step body run times
//	cairn_reconciler_repairs_total{kind}
//
// Gauges read from Redis at scrape time, bounded by Config.Timeout (a read
// that fails or times out is left out of the scrape and counted in
// cairn_metrics_collect_errors_total{source}):
//
//	cairn_runs{status}                                  runs retained, by status: pending, running,
//	                                                    succeeded, failed, cancelled, compensating,
//	                                                    compensated
//	cairn_runs_needing_attention                        runs an operator must look at
//	asynq_tasks_enqueued_total{queue,state}             asynq tasks by state (pending, active,
//	                                                    scheduled, retry, archived, completed)
//	asynq_queue_size{queue}, asynq_queue_latency_seconds{queue},
//	asynq_queue_memory_usage_approx_bytes{queue}, asynq_queue_paused_total{queue},
//	asynq_tasks_processed_total{queue}, asynq_tasks_failed_total{queue}
//	cairn_workers{queue}                                workers alive on the queue (Cairn's own dequeue:
//	                                                    an unexpired heartbeat), one ZCOUNT per queue
//	cairn_redis_up                                      1: that read answered in time; 0: it failed,
//	                                                    timed out, or an earlier one is still out
//	                                                    (counted as source "workers")
//
// Always, without Redis:
//
//	cairn_info{queue}                                   1; its queue label is Config.Queue, to break
//	                                                    the other metrics down by queue:
//	                                                    ... * on (job, instance) group_left (queue) cairn_info
//
// With Config.Outbox (a workflow.Client opened with an outbox), the outbox,
// read from its local file at scrape time:
//
//	cairn_outbox_entries                                starts and signals queued, not yet sent
//	cairn_outbox_bytes                                  their size
//	cairn_outbox_capacity_entries                       the most it holds (workflow.ClientConfig.OutboxMaxEntries)
//	cairn_outbox_oldest_age_seconds                     age of the oldest queued entry (0: empty)
//	cairn_outbox_dead_letters                           entries Redis refused, kept as dead letters
//	cairn_outbox_flushed_total                          entries this client applied
//	cairn_outbox_dead_lettered_total                    entries this client moved to the dead letters
//
// The asynq metrics have the names and labels of asynq's own x/metrics
// collector, so asynqmon's metrics view works on them.
package metrics
