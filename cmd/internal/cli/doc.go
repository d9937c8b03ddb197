// Package cli implements enqueue, Cairn's command-line client: it starts
// workflow runs, shows their status, steps and journal, lists runs and
// steers them (cancel, recover, retry, skip, signal), through
// workflow.Client.
//
// cmd/enqueue is a thin main around [Main]; everything here takes its
// arguments, standard streams and environment as parameters, so the whole
// CLI runs in-process in tests.
//
// The commands are a github.com/spf13/cobra tree (root.go) built for each
// invocation from the commands table (args.go): cobra and pflag parse the
// flags, dispatch, suggest commands and answer the shells' completion
// requests (completion.go, the hidden "__complete" command); the help
// text, the error lines and the exit codes are the CLI's own.
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
//   - Files are read only when regular (a named pipe, a device or a
//     directory is refused without waiting) and only up to their limit:
//     1 MiB for the run input, 8 MiB for validate's workflows file. Reading
//     stdin stops when the context is done (SIGINT or SIGTERM).
//   - Exit codes: 0 success; 1 the run ended failed or cancelled (--wait,
//     events --follow), an operational error (Redis unreachable, cancel of a
//     finished run, an action refused), validate found problems, or
//     interrupted; 2 a usage error or bad input (unknown command or flag,
//     bad flag value, missing argument, malformed or too large input, an
//     input or validate file that is missing, unreadable or not a regular
//     file, unknown workflow, invalid or unknown run ID, a run ID prefix
//     that matches no run or several, invalid status, limit or cursor, bad
//     configuration). The usage text (see usage) and docs/cli.md list
//     them; keep the three in step.
//   - A run ID argument may be a unique prefix of one, or --last for the
//     newest run (runref.go); they resolve once connected, over every run
//     of the queue.
//   - Tables (table.go) are cut to the terminal's width and coloured only
//     when stdout is a terminal; otherwise their output is stable.
package cli
