package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cairnhq/cairn/internal/editdist"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cairnhq/cairn/cmd/internal/config"
	"github.com/cairnhq/cairn/cmd/internal/version"
)

// Run runs the CLI with args (without the program name) and returns the
// exit code.
//
// The commands are a github.com/spf13/cobra tree (newRoot), built for this
// invocation from the commands table; cobra parses the flags (pflag),
// dispatches, suggests commands and completes. The help text, the error
// lines and the exit codes stay the CLI's own: cobra prints nothing itself
// but the help and completion output.
func (c *CLI) Run(ctx context.Context, args []string) int {
	if c.Stdin == nil {
		c.Stdin = strings.NewReader("")
	}
	// --version before any command (after --no-color) takes no argument.
	lead := args
	for len(lead) > 0 && (lead[0] == "--no-color" || lead[0] == "-no-color") {
		lead = lead[1:]
	}
	if len(lead) > 0 && (lead[0] == "--version" || lead[0] == "-version") {
		if len(lead) > 1 {
			return c.fail(usageErrorf("--version takes no argument (got %q)", lead[1]))
		}
		_, err := fmt.Fprintln(c.Stdout, version.Line("enqueue"))
		return c.fail(err)
	}
	code := ExitOK
	root := c.newRoot(&code)
	if len(args) == 0 || (args[0] != cobra.ShellCompRequestCmd && args[0] != cobra.ShellCompNoDescRequestCmd) {
		args = normalizeArgs(root, args)
	}
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		return c.fail(err)
	}
	return code
}

// newRoot builds the command tree of one invocation: the commands of the
// commands table, help, and cobra's hidden __complete. A command's exit
// code goes to *code.
func (c *CLI) newRoot(code *int) *cobra.Command {
	root := &cobra.Command{
		Use:               "enqueue",
		Short:             "start Cairn workflow runs, and show and steer them",
		SilenceErrors:     true,
		SilenceUsage:      true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
		// Suggest a command at most 2 edits away, or one that starts
		// with what was typed (cobra's SuggestionsFor).
		SuggestionsMinimumDistance: 2,
	}
	root.InitDefaultHelpFlag()
	root.Flags().Lookup("help").Usage = "show the help"
	root.Args = func(_ *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		return unknownCommand(root, "", args[0])
	}
	root.Run = func(cmd *cobra.Command, _ []string) {
		if v, _ := cmd.Flags().GetBool("version"); v {
			*code = c.fail(writeLine(c, version.Line("enqueue")))
			return
		}
		// No command: the usage, as an error.
		fmt.Fprint(c.Stderr, usage())
		*code = ExitUsage
	}
	root.SetIn(c.Stdin)
	root.SetOut(c.Stdout)
	root.SetErr(c.Stderr)
	root.PersistentFlags().BoolVar(&c.noColor, "no-color", c.noColor, "no colour in the output")
	root.Flags().Bool("version", false, "print the version of enqueue")
	root.SetFlagErrorFunc(flagError)
	root.SetHelpFunc(func(cmd *cobra.Command, args []string) {
		text := usage()
		if def := lookup(cmd.Name()); def != nil && cmd != root {
			text = def.usage()
		}
		if cmd == root {
			// "--help bogus": no command is called bogus, as with "help bogus".
			for _, a := range args {
				if !strings.HasPrefix(a, "-") {
					*code = c.fail(unknownCommand(root, "help: ", a))
					return
				}
			}
		}
		fmt.Fprint(c.Stdout, text)
	})
	root.SetHelpCommand(c.helpCommand(root))
	for _, def := range commands {
		root.AddCommand(c.cobraCommand(def, code))
	}
	return root
}

func writeLine(c *CLI, line string) error {
	_, err := fmt.Fprintln(c.Stdout, line)
	return err
}

// cobraCommand is the cobra command of def: its flags, their completion,
// and a RunE that checks the arguments, then runs the action (execute).
func (c *CLI) cobraCommand(def *command, code *int) *cobra.Command {
	cmd := &cobra.Command{
		Use:               def.synopsis,
		Short:             def.summary,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: c.completeArgs(def),
	}
	check := def.parse(c, cmd.Flags())
	for _, doc := range def.flags {
		head, desc, _ := strings.Cut(doc, "\t")
		name, _, _ := strings.Cut(strings.TrimPrefix(head, "--"), " ")
		if f := cmd.Flags().Lookup(name); f != nil {
			f.Usage = shortDesc(desc)
		}
	}
	cmd.InitDefaultHelpFlag()
	cmd.Flags().Lookup("help").Usage = "show the command's help"
	c.completeFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		act, err := check(cmd.Context(), pos)
		if err != nil {
			return err
		}
		*code = c.execute(cmd.Context(), def, act)
		return nil
	}
	return cmd
}

// helpCommand is "help [command]": the usage, or a command's, on stdout.
func (c *CLI) helpCommand(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "show this help, or a command's",
		Args:  cobra.ArbitraryArgs,
		ValidArgsFunction: func(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return commandCompletions(toComplete), cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(_ *cobra.Command, args []string) error {
			switch {
			case len(args) == 0 || (len(args) == 1 && isHelp(args[0])):
				fmt.Fprint(c.Stdout, usage())
			case len(args) == 1 && lookup(args[0]) != nil:
				fmt.Fprint(c.Stdout, lookup(args[0]).usage())
			case len(args) == 1:
				return unknownCommand(root, "help: ", args[0])
			default:
				return usageErrorf("help: too many arguments (usage: enqueue help [command])")
			}
			return nil
		},
	}
}

func isHelp(s string) bool {
	switch s {
	case "help", "-h", "-help", "--help":
		return true
	}
	return false
}

// execute runs a parsed command's action: with no configuration
// (standalone), with the configuration only (offline), or connected to
// Redis (through the outbox, with CAIRN_OUTBOX), and returns its exit code.
func (c *CLI) execute(ctx context.Context, cmd *command, act action) int {
	if cmd.standalone {
		return c.fail(act(ctx, &session{cli: c}))
	}
	cfg, err := config.Load(c.Environ)
	if err != nil {
		return c.configFail(err)
	}
	if cmd.offline {
		return c.fail(act(ctx, &session{cli: c, cfg: cfg}))
	}
	if cfg.Outbox != "" && cmd.queues {
		// No ping: a start or signal that cannot reach Redis queues.
		s, err := c.connectOutbox(ctx, cfg)
		if err != nil {
			return c.fail(err)
		}
		defer s.close()
		return c.fail(act(ctx, s))
	}
	s, err := c.connect(ctx, cfg)
	if err != nil {
		return c.fail(err)
	}
	defer s.close()
	if cfg.Outbox != "" {
		if err := s.openOutbox(ctx, false); err != nil {
			return c.fail(err)
		}
	}
	return c.fail(act(ctx, s))
}

// unknownCommand is the error of an unknown command name, with the
// commands cobra finds close to it (by Levenshtein distance, or that start
// with it).
func unknownCommand(root *cobra.Command, prefix, name string) error {
	hint := ""
	if s := root.SuggestionsFor(name); len(s) > 0 {
		hint = fmt.Sprintf(": did you mean %s?", quotedOrList(s))
	}
	return usageErrorf("%sunknown command %q%s (run \"enqueue help\" for usage)", prefix, name, hint)
}

// quotedOrList joins words, quoted, as "a", "b" or "c".
func quotedOrList(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = fmt.Sprintf("%q", w)
	}
	return orList(q)
}

// flagError turns pflag's parse errors into the CLI's usage errors (exit
// code 2), naming the command and, for an unknown flag, the closest flag
// it takes.
func flagError(cmd *cobra.Command, err error) error {
	prefix, help := cmd.Name()+": ", "enqueue help "+cmd.Name()
	if !cmd.HasParent() {
		prefix, help = "", "enqueue help"
	}
	hint := fmt.Sprintf("(run %q for usage)", help)
	if ne, ok := errors.AsType[*pflag.NotExistError](err); ok {
		name := ne.GetSpecifiedName()
		shown := "--" + name
		if ne.GetSpecifiedShortnames() != "" {
			shown = "-" + ne.GetSpecifiedShortnames()
		}
		if s := closestFlag(cmd.Flags(), name); s != "" {
			return usageErrorf("%sunknown flag %q: did you mean \"--%s\"? %s", prefix, shown, s, hint)
		}
		return usageErrorf("%sunknown flag %q %s", prefix, shown, hint)
	}
	if ie, ok := errors.AsType[*pflag.InvalidValueError](err); ok {
		want := oneLine(errors.Unwrap(err).Error())
		switch ie.GetFlag().Value.Type() {
		case "int":
			want = "want a whole number"
		case "bool":
			want = "want true or false"
		}
		return usageErrorf("%sinvalid value %q for flag --%s: %s %s", prefix, ie.GetValue(), ie.GetFlag().Name, want, hint)
	}
	if re, ok := errors.AsType[*pflag.ValueRequiredError](err); ok {
		return usageErrorf("%sflag --%s needs a value %s", prefix, re.GetFlag().Name, hint)
	}
	return usageErrorf("%s%v %s", prefix, err, hint)
}

// maxFlagDistance is the largest Levenshtein distance between a mistyped
// flag and the flag suggested for it.
const maxFlagDistance = 2

// closestFlag returns the name of the flag of fs closest to name: at most
// maxFlagDistance edits away, or starting with it (3 characters or more);
// "" when none is. Of flags as close, the first by name wins.
func closestFlag(fs *pflag.FlagSet, name string) string {
	best, bestD := "", maxFlagDistance+1
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		d := editdist.Distance(strings.ToLower(name), f.Name)
		if len(name) >= 3 && strings.HasPrefix(f.Name, name) {
			d = min(d, 1)
		}
		if d < bestD {
			best, bestD = f.Name, d
		}
	})
	return best
}

// normalizeArgs rewrites the single-dash long flags the CLI has always
// taken (-wait, -no-color=true) as pflag's --wait, and an unknown one too,
// so that its error names it with two dashes. The values of flags that
// take one, and everything after "--", are left as they are; so are "-"
// and one-letter flags (-h).
func normalizeArgs(root *cobra.Command, args []string) []string {
	cmd, _, err := root.Find(args)
	if err != nil || cmd == nil {
		cmd = root
	}
	cmd.InitDefaultHelpFlag()
	flags, inherited := cmd.Flags(), cmd.InheritedFlags()
	find := func(name string) *pflag.Flag {
		if f := flags.Lookup(name); f != nil {
			return f
		}
		return inherited.Lookup(name)
	}
	out := slices.Clone(args)
	for i := 0; i < len(out); i++ {
		a := out[i]
		if a == "--" {
			break
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' {
			a = "-" + a
			out[i] = a
		}
		rest, ok := strings.CutPrefix(a, "--")
		if !ok {
			continue
		}
		name, _, hasValue := strings.Cut(rest, "=")
		if f := find(name); f != nil && !hasValue && f.NoOptDefVal == "" {
			i++ // its value, whatever it looks like
		}
	}
	return out
}
