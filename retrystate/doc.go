// Package retrystate owns every Redis key and Lua script of Cairn's workflow
// state: run and step records (with their retry metadata and checkpoints), the
// indexes the reconciler reads, the per-run journal and the notification
// stream. It is the only package that builds a Cairn key or talks to Redis
// about runs.
//
// Every key of a queue carries the queue's hash tag, cairn:{queue}:..., so each
// script touches one Redis Cluster slot, next to asynq's own asynq:{queue}:...
// keys. Every state transition is one Lua script (see the lua folder; each
// begins with a KEYS/ARGV header), is fenced where a worker writes, journals
// what it did, and is given "now" by the caller: no script reads the server
// clock.
//
// Times are stored as Unix milliseconds.
package retrystate
