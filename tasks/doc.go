// Package tasks is the contract between Cairn and asynq: the task type name
// of a step attempt, its payload encoding, the deterministic task ID of each
// attempt, the asynq options an attempt is enqueued with, and the Lua by
// which Cairn's state scripts write asynq's task records themselves
// (Lua; CheckAsynqWire checks it against asynq at every worker's start).
//
// Every step attempt is one asynq task. Its ID is derived from the run ID, the
// step index, the attempt number and a dispatch generation, so enqueueing the
// same attempt twice is a no-op (asynq answers ErrTaskIDConflict) and every
// enqueue can be retried safely. IDs never contain '-', which asynqmon
// truncates at.
//
// It is also the one owner of asynq's private layout in Redis, at the pinned
// asynq version: the names of asynq's keys (Keys, AllQueues), its task
// record and TaskMessage (AsynqMessage, DecodeMessage), and the start-up
// check that what Cairn writes is what the linked asynq writes
// (CheckAsynqWire). No other package spells an asynq key or decodes an
// asynq record: an asynq upgrade that changes them is a change here.
package tasks
