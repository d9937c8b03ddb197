// Package cli implements enqueue, Cairn's command-line client: it starts
// workflow runs, shows their status, steps and journal, lists runs and
// cancels them, through workflow.Client.
//
// cmd/enqueue is a thin main around [Main]; everything here takes its
// arguments, standard streams and environment as parameters, so the whole
// CLI runs in-process in tests.
//
// Conventions:
//
//   - Results go to stdout (a run ID, a table or indented JSON); progress
//     and errors go to stderr.
//   - An error prints exactly one line, prefixed "enqueue: ", on stderr and
//     nothing on stdout. (A configuration with several problems prints one
//     line per problem.)
//   - Arguments, the run input and run IDs are checked before the CLI talks
//     to Redis, so bad input never writes anything.
//   - Exit codes: 0 success; 1 the run ended failed or cancelled (start
//     --wait) or an operational error (Redis unreachable, cancel of a
//     finished run); 2 a usage error or bad input (unknown command or flag,
//     missing argument, malformed input, unknown workflow, invalid or
//     unknown run ID, invalid status, bad configuration).
package cli
