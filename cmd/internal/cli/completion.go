package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cairnhq/cairn/cmd/internal/config"
	"github.com/cairnhq/cairn/workflow"
)

// shells are the shells completion writes a script for.
var shells = []string{"bash", "zsh", "fish", "powershell"}

// Dynamic completion (run IDs, workflow and breaker names) reads Redis
// within these bounds, and offers nothing when it cannot.
const (
	// completionTimeout bounds the whole lookup: a completion that hangs
	// the shell is worse than none.
	completionTimeout = 2 * time.Second
	// completionDialTimeout and completionIOTimeout are the Redis
	// client's timeouts, shorter than the commands'.
	completionDialTimeout = 500 * time.Millisecond
	completionIOTimeout   = time.Second
	// completionRuns is how many of the newest runs are offered.
	completionRuns = 30
)

// parseCompletion parses "completion bash|zsh|fish|powershell". The
// scripts are cobra's: they call the hidden "enqueue __complete" command,
// so run IDs and workflow names are completed from the queue the
// environment names, as the commands would use it.
func parseCompletion(c *CLI, _ *pflag.FlagSet) parseFunc {
	return func(_ context.Context, pos []string) (action, error) {
		shell, err := positional("completion", pos, "shell ("+orList(shells)+")")
		if err != nil {
			return nil, err
		}
		if !slices.Contains(shells, shell) {
			return nil, usageErrorf("completion: unknown shell %q: want %s", shell, orList(shells))
		}
		return func(_ context.Context, s *session) error {
			return writeCompletion(c.newRoot(new(int)), shell, s.stdout())
		}, nil
	}
}

// completionHeaders say how to load each shell's script.
var completionHeaders = map[string]string{
	"bash": `# bash completion for enqueue, Cairn's CLI (written by: enqueue completion bash).
# Load it in this shell:     source <(enqueue completion bash)
# or for every new shell:    enqueue completion bash > ~/.local/share/bash-completion/completions/enqueue
`,
	"zsh": `#compdef enqueue
# zsh completion for enqueue, Cairn's CLI (written by: enqueue completion zsh).
# Load it in this shell:     source <(enqueue completion zsh)
# or for every new shell, as _enqueue in a directory of $fpath:
#                            enqueue completion zsh > "${fpath[1]}/_enqueue"
`,
	"fish": `# fish completion for enqueue, Cairn's CLI (written by: enqueue completion fish).
# Load it in this shell:     enqueue completion fish | source
# or for every new shell:    enqueue completion fish > ~/.config/fish/completions/enqueue.fish
`,
	"powershell": `# PowerShell completion for enqueue, Cairn's CLI (written by: enqueue completion powershell).
# Load it in this shell:     enqueue completion powershell | Out-String | Invoke-Expression
# or for every new shell, add that line to $PROFILE.
`,
}

// writeCompletion writes the completion script of shell, with
// descriptions.
func writeCompletion(root *cobra.Command, shell string, w io.Writer) error {
	var b strings.Builder
	var err error
	switch shell {
	case "bash":
		err = root.GenBashCompletionV2(&b, true)
	case "zsh":
		err = root.GenZshCompletion(&b)
		// cobra's script starts with its own #compdef line: ours is first.
		s := strings.TrimPrefix(b.String(), "#compdef enqueue\n")
		b.Reset()
		b.WriteString(s)
	case "fish":
		err = root.GenFishCompletion(&b, true)
	case "powershell":
		err = root.GenPowerShellCompletionWithDesc(&b)
	}
	if err != nil {
		return err
	}
	_, err = io.WriteString(w, completionHeaders[shell]+b.String())
	return err
}

// runArgCommands take a run ID as their first argument (or --last).
var runArgCommands = []string{"status", "events", "cancel", "pause", "resume", "recover", "retry", "skip", "signal"}

// completeArgs completes def's positional arguments: workflow names
// (start), recent run IDs, breaker names, shells, or files (validate).
func (c *CLI) completeArgs(def *command) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		none := cobra.ShellCompDirectiveNoFileComp
		switch {
		case def.name == "start" && len(args) == 0:
			return c.completeWorkflows(cmd.Context(), toComplete), none
		case slices.Contains(runArgCommands, def.name) && len(args) == 0 && !flagSet(cmd.Flags(), "last"):
			return c.completeRunIDs(cmd.Context(), toComplete), none
		case def.name == "signal" && len(args) == 1 && !flagSet(cmd.Flags(), "last"),
			def.name == "signal" && len(args) == 0 && flagSet(cmd.Flags(), "last"):
			return c.completeSignals(cmd, args, toComplete), none
		case def.name == "completion" && len(args) == 0:
			return prefixed(shells, toComplete), none
		case def.name == "breaker" && len(args) == 0:
			return prefixed([]string{"reset"}, toComplete), none
		case def.name == "breaker" && len(args) == 1 && args[0] == "reset":
			return c.completeBreakers(cmd.Context(), toComplete), none
		case def.name == "validate" && len(args) == 0:
			return nil, cobra.ShellCompDirectiveDefault // a file
		}
		return nil, none
	}
}

// completeFlags registers the completion of the values of cmd's flags:
// list --status's statuses, --id-prefix's run IDs, --input's "input.",
// --since's and --until's durations, latency --window's windows and
// --workflow's workflows; no files for the flags that take none.
func (c *CLI) completeFlags(cmd *cobra.Command) {
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.NoOptDefVal != "" {
			return // a boolean flag
		}
		var fn cobra.CompletionFunc
		switch f.Name {
		case "status":
			fn = func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
				return prefixed(statuses, toComplete), cobra.ShellCompDirectiveNoFileComp
			}
		case "window":
			fn = func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
				return prefixed(latencyWindowNames, toComplete), cobra.ShellCompDirectiveNoFileComp
			}
		case "workflow":
			fn = func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
				return c.completeWorkflows(cmd.Context(), toComplete), cobra.ShellCompDirectiveNoFileComp
			}
		case "step":
			fn = func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
				return c.completeSteps(cmd, args, toComplete), cobra.ShellCompDirectiveNoFileComp
			}
		case "input", "payload":
			if cmd.Name() == "list" {
				// A condition on the input: input.<path>=<value>.
				fn = func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
					return prefixed([]string{"input."}, toComplete), cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
				}
				break
			}
			fn = func(_ *cobra.Command, _ []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
				return nil, cobra.ShellCompDirectiveDefault // JSON text, or @file
			}
		case "id-prefix":
			fn = func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
				return c.completeRunIDs(cmd.Context(), toComplete), cobra.ShellCompDirectiveNoFileComp
			}
		case "since", "until":
			fn = func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
				return prefixed([]string{"1h", "24h", "7d", "30d"}, toComplete), cobra.ShellCompDirectiveNoFileComp
			}
		default:
			fn = cobra.NoFileCompletions
		}
		_ = cmd.RegisterFlagCompletionFunc(f.Name, fn)
	})
}

// commandCompletions are the command names starting with toComplete, with
// their summaries, for help's argument.
func commandCompletions(toComplete string) []cobra.Completion {
	var out []cobra.Completion
	for _, cmd := range commands {
		if strings.HasPrefix(cmd.name, toComplete) {
			out = append(out, cobra.CompletionWithDesc(cmd.name, shortDesc(cmd.summary)))
		}
	}
	return out
}

// prefixed returns the words that start with prefix.
func prefixed(words []string, prefix string) []cobra.Completion {
	var out []cobra.Completion
	for _, w := range words {
		if strings.HasPrefix(w, prefix) {
			out = append(out, w)
		}
	}
	return out
}

// completionSession is a session for a completion's lookups: a workflow
// client with short timeouts and no logging, no outbox, no ping; nil when
// the configuration is bad.
func (c *CLI) completionSession() *session {
	cfg, err := config.Load(c.Environ)
	if err != nil {
		return nil
	}
	target, err := cfg.Redis()
	if err != nil {
		return nil
	}
	target.DefaultTimeouts(config.Timeouts{Dial: completionDialTimeout, Read: completionIOTimeout,
		Write: completionIOTimeout, DialerRetries: 1})
	rdb := target.NewClient()
	client := workflow.NewClient(rdb, workflow.ClientConfig{Queue: cfg.Queue, Logger: slog.New(slog.DiscardHandler)})
	return &session{cli: c, cfg: cfg, rdb: rdb, client: client}
}

// completionLookup runs look on a completion session, within
// completionTimeout; on any error it returns nil: completion stays silent.
func (c *CLI) completionLookup(ctx context.Context, look func(context.Context, *session) ([]cobra.Completion, error)) []cobra.Completion {
	if ctx == nil {
		ctx = context.Background()
	}
	s := c.completionSession()
	if s == nil {
		return nil
	}
	defer s.close()
	ctx, cancel := context.WithTimeout(ctx, completionTimeout)
	defer cancel()
	out, err := look(ctx, s)
	if err != nil {
		return nil
	}
	return out
}

// completeRunIDs offers the IDs of the completionRuns newest runs that
// start with toComplete (with 4 characters or more, of the runs that start
// with it, however old), described by their workflow, status and age.
func (c *CLI) completeRunIDs(ctx context.Context, toComplete string) []cobra.Completion {
	now := c.now()
	prefix := strings.ToLower(toComplete)
	return c.completionLookup(ctx, func(ctx context.Context, s *session) ([]cobra.Completion, error) {
		var runs []*workflow.Run
		var err error
		if len(prefix) >= minRunIDPrefix && workflow.ValidRunIDPrefix(prefix) {
			runs, err = s.client.FindRuns(ctx, prefix, workflow.FindRunsOptions{Limit: completionRuns})
		} else {
			runs, _, err = s.client.List(ctx, workflow.ListOptions{Limit: completionRuns})
		}
		if err != nil {
			return nil, err
		}
		var out []cobra.Completion
		for _, run := range runs {
			if !strings.HasPrefix(run.ID, prefix) {
				continue
			}
			desc := fmt.Sprintf("%s %s, %s ago", run.Workflow, run.Status, fmtDuration(now.Sub(run.CreatedAt).Truncate(time.Second)))
			out = append(out, cobra.CompletionWithDesc(run.ID, desc))
		}
		return out, nil
	})
}

// completeFromRun offers what offer finds in the run the command line
// names (args[0], or --last): nil when it names none.
func (c *CLI) completeFromRun(cmd *cobra.Command, args []string, offer func(*workflow.Run) []cobra.Completion) []cobra.Completion {
	ref := runRef{last: flagSet(cmd.Flags(), "last")}
	if !ref.last {
		if len(args) == 0 {
			return nil
		}
		ref.arg = strings.ToLower(args[0])
	}
	return c.completionLookup(cmd.Context(), func(ctx context.Context, s *session) ([]cobra.Completion, error) {
		id, err := s.resolve(ctx, ref)
		if err != nil {
			return nil, err
		}
		run, err := s.client.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		return offer(run), nil
	})
}

// completeSteps offers, for retry and skip --step, the failed steps of the
// run the command line names: for retry also the failed compensations
// (compensate:STEP), for skip only optional steps; for retry --now the step
// waiting out a retry's backoff.
func (c *CLI) completeSteps(cmd *cobra.Command, args []string, toComplete string) []cobra.Completion {
	return c.completeFromRun(cmd, args, func(run *workflow.Run) []cobra.Completion {
		var out []cobra.Completion
		add := func(name string, st *workflow.StepState) {
			if strings.HasPrefix(name, toComplete) {
				out = append(out, cobra.CompletionWithDesc(name, "failed: "+oneLine(st.LastError)))
			}
		}
		if cmd.Name() == "retry" && flagSet(cmd.Flags(), "now") {
			// retry --now: the step waiting out a retry's backoff.
			for i := range run.Steps {
				st := &run.Steps[i]
				if st.Name == run.CurrentStep && st.RetryState == workflow.RetryScheduled && !st.Snoozed && st.NextAttemptAt != nil &&
					strings.HasPrefix(st.Name, toComplete) {
					out = append(out, cobra.CompletionWithDesc(st.Name, "retry due "+st.NextAttemptAt.UTC().Format(time.RFC3339)))
				}
			}
			return out
		}
		for i := range run.Steps {
			st := &run.Steps[i]
			if st.Status == workflow.StepFailed && (cmd.Name() == "retry" || st.Optional) {
				add(st.Name, st)
			}
			if comp := st.Compensation; cmd.Name() == "retry" && comp != nil && comp.Status == workflow.StepFailed {
				add("compensate:"+st.Name, comp)
			}
		}
		return out
	})
}

// completeSignals offers, for signal's name, the signals the run the
// command line names awaits now.
func (c *CLI) completeSignals(cmd *cobra.Command, args []string, toComplete string) []cobra.Completion {
	return c.completeFromRun(cmd, args, func(run *workflow.Run) []cobra.Completion {
		var out []cobra.Completion
		for _, st := range run.Steps {
			if w := st.WaitingFor; st.Status == workflow.StepWaiting && w != nil && w.Signal != "" &&
				strings.HasPrefix(w.Signal, toComplete) {
				out = append(out, cobra.CompletionWithDesc(w.Signal, "awaited by step "+st.Name))
			}
		}
		return out
	})
}

// completeWorkflows offers the workflows the queue's workers have
// registered that start with toComplete, described by their steps.
func (c *CLI) completeWorkflows(ctx context.Context, toComplete string) []cobra.Completion {
	return c.completionLookup(ctx, func(ctx context.Context, s *session) ([]cobra.Completion, error) {
		defs, err := s.client.Workflows(ctx)
		if err != nil {
			return nil, err
		}
		names := make([]string, 0, len(defs))
		for name := range defs {
			if strings.HasPrefix(name, toComplete) {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		out := make([]cobra.Completion, len(names))
		for i, name := range names {
			out[i] = cobra.CompletionWithDesc(name, "steps: "+strings.Join(defs[name], ", "))
		}
		return out, nil
	})
}

// completeBreakers offers the names of the queue's circuit breakers that
// start with toComplete, described by their state.
func (c *CLI) completeBreakers(ctx context.Context, toComplete string) []cobra.Completion {
	return c.completionLookup(ctx, func(ctx context.Context, s *session) ([]cobra.Completion, error) {
		bs, err := s.client.Breakers(ctx)
		if err != nil {
			return nil, err
		}
		var out []cobra.Completion
		for _, b := range bs {
			if strings.HasPrefix(b.Name, toComplete) {
				out = append(out, cobra.CompletionWithDesc(b.Name, b.State))
			}
		}
		return out, nil
	})
}

// shortDesc is a description for completion: its first clause, without
// what it says in parentheses.
func shortDesc(s string) string {
	for _, sep := range []string{": ", "; "} {
		if i := strings.Index(s, sep); i > 0 {
			s = s[:i]
		}
	}
	var b strings.Builder
	depth := 0
	for _, r := range s {
		switch {
		case r == '(':
			depth++
		case r == ')' && depth > 0:
			depth--
		case depth == 0:
			b.WriteRune(r)
		}
	}
	return strings.ReplaceAll(strings.Join(strings.Fields(b.String()), " "), " ,", ",")
}
