package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
)

// shells are the shells completion writes a script for.
var shells = []string{"bash", "zsh", "fish"}

// globalFlags are the flags enqueue takes before a command, for completion.
var globalFlags = []string{
	"--help\tshow the help",
	"--version\tprint the version of enqueue",
	"--no-color\tno colour in the output",
}

// parseCompletion parses "completion bash|zsh|fish".
func parseCompletion(_ context.Context, c *CLI, args []string) (action, error) {
	fs := c.newFlagSet("completion")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return nil, err
	}
	shell, err := positional("completion", pos, "shell ("+orList(shells)+")")
	if err != nil {
		return nil, err
	}
	write := map[string]func(io.Writer) error{"bash": writeBash, "zsh": writeZsh, "fish": writeFish}[shell]
	if write == nil {
		return nil, usageErrorf("completion: unknown shell %q: want %s", shell, orList(shells))
	}
	return func(_ context.Context, s *session) error { return write(s.stdout()) }, nil
}

// compFlag is a flag as completion offers it.
type compFlag struct {
	name string // without its dashes
	// arg names the flag's value ("" for a boolean flag).
	arg string
	// desc is the first clause of its description.
	desc string
}

// flagsOf returns a command's flags (nil: the global flags), --no-color
// and --help included.
func flagsOf(cmd *command) []compFlag {
	docs := globalFlags
	if cmd != nil {
		docs = append(slices.Clone(cmd.flags), "--no-color\tno colour in the output", "--help\tshow the command's help")
	}
	out := make([]compFlag, 0, len(docs))
	for _, d := range docs {
		head, desc, _ := strings.Cut(d, "\t")
		name, arg, _ := strings.Cut(strings.TrimPrefix(head, "--"), " ")
		out = append(out, compFlag{name: name, arg: arg, desc: shortDesc(desc)})
	}
	return out
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

// flagValues returns the values a flag takes, for completion (nil: any).
func flagValues(f compFlag) []string {
	if f.name == "status" {
		return statuses
	}
	return nil
}

// argWords returns the words completion offers for a command's arguments
// (nil: none known).
func argWords(cmd *command) []string {
	switch cmd.name {
	case "help":
		return commandNames()
	case "completion":
		return shells
	case "breaker":
		return []string{"reset"}
	}
	return nil
}

// fileArg reports whether a command's argument is a file.
func fileArg(cmd *command) bool { return cmd.name == "validate" }

func commandNames() []string {
	names := make([]string, 0, len(commands)+1)
	for _, c := range commands {
		names = append(names, c.name)
	}
	return append(names, "help")
}

// allCommands returns the commands, with help.
func allCommands() []*command {
	return append(slices.Clone(commands), &command{name: "help", summary: "show the help, or a command's"})
}

// writeBash writes the bash completion script.
func writeBash(w io.Writer) error {
	var b strings.Builder
	b.WriteString(`# bash completion for enqueue, Cairn's CLI (written by: enqueue completion bash).
# Load it in this shell:     source <(enqueue completion bash)
# or for every new shell:    enqueue completion bash > ~/.local/share/bash-completion/completions/enqueue
_enqueue() {
    local cur prev cmd i words flags
    COMPREPLY=()
    cur="${COMP_WORDS[COMP_CWORD]}"
    prev="${COMP_WORDS[COMP_CWORD-1]}"
    cmd=""
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "${COMP_WORDS[i]}" in
            -*) ;;
            *) cmd="${COMP_WORDS[i]}"; break ;;
        esac
    done
    if [[ -z "$cmd" ]]; then
`)
	fmt.Fprintf(&b, "        COMPREPLY=($(compgen -W %s -- \"$cur\"))\n", shQuote(strings.Join(append(commandNames(), flagNames(nil)...), " ")))
	b.WriteString("        return\n    fi\n    case \"$prev\" in\n")
	// Flags that take a value: complete the value, not another flag.
	seen := map[string]bool{}
	for _, c := range allCommands() {
		for _, f := range flagsOf(c) {
			if f.arg == "" || seen[f.name] {
				continue
			}
			seen[f.name] = true
			switch vals := flagValues(f); {
			case vals != nil:
				fmt.Fprintf(&b, "        --%s) COMPREPLY=($(compgen -W %s -- \"$cur\")); return ;;\n", f.name,
					shQuote(strings.Join(vals, " ")))
			case strings.Contains(f.arg, "file"):
				fmt.Fprintf(&b, "        --%s) COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n", f.name)
			default:
				fmt.Fprintf(&b, "        --%s) return ;;\n", f.name)
			}
		}
	}
	b.WriteString("    esac\n    case \"$cmd\" in\n")
	for _, c := range allCommands() {
		words := ""
		if ws := argWords(c); ws != nil {
			words = strings.Join(ws, " ")
		}
		fmt.Fprintf(&b, "        %s) flags=%s; words=%s ;;\n", c.name, shQuote(strings.Join(flagNames(c), " ")), shQuote(words))
	}
	b.WriteString(`        *) return ;;
    esac
    if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$flags" -- "$cur"))
    elif [[ -n "$words" ]]; then
        COMPREPLY=($(compgen -W "$words" -- "$cur"))
    elif [[ "$cmd" == validate ]]; then
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}
complete -F _enqueue enqueue
`)
	_, err := io.WriteString(w, b.String())
	return err
}

// flagNames returns a command's flags (nil: the global ones) as "--name".
func flagNames(cmd *command) []string {
	var out []string
	for _, f := range flagsOf(cmd) {
		out = append(out, "--"+f.name)
	}
	return out
}

// shQuote quotes s for sh and bash: between single quotes.
func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// zshDesc makes s safe in a zsh completion spec's [description] or
// name:description, within single quotes.
func zshDesc(s string) string {
	r := strings.NewReplacer("'", `'\''`, "[", "(", "]", ")", ":", " ", "\\", "")
	return r.Replace(s)
}

// writeZsh writes the zsh completion script.
func writeZsh(w io.Writer) error {
	var b strings.Builder
	b.WriteString(`#compdef enqueue
# zsh completion for enqueue, Cairn's CLI (written by: enqueue completion zsh).
# Load it in this shell:     source <(enqueue completion zsh)
# or for every new shell, as _enqueue in a directory of $fpath:
#                            enqueue completion zsh > "${fpath[1]}/_enqueue"
_enqueue() {
    local -a commands global
    commands=(
`)
	for _, c := range allCommands() {
		fmt.Fprintf(&b, "        '%s:%s'\n", c.name, zshDesc(shortDesc(c.summary)))
	}
	b.WriteString("    )\n    global=(\n")
	for _, f := range flagsOf(nil) {
		fmt.Fprintf(&b, "        '--%s[%s]'\n", f.name, zshDesc(f.desc))
	}
	b.WriteString(`    )
    if (( CURRENT == 2 )); then
        _describe -t commands 'enqueue command' commands
        _arguments -s $global
        return
    fi
    local cmd=${words[2]}
    shift words
    (( CURRENT-- ))
    case $cmd in
`)
	for _, c := range allCommands() {
		fmt.Fprintf(&b, "        %s)\n            _arguments -s \\\n", c.name)
		for _, f := range flagsOf(c) {
			spec := fmt.Sprintf("--%s[%s]", f.name, zshDesc(f.desc))
			if f.arg != "" {
				action := " "
				if vals := flagValues(f); vals != nil {
					action = "(" + strings.Join(vals, " ") + ")"
				} else if strings.Contains(f.arg, "file") {
					action = "_files"
				}
				spec += ":" + zshDesc(strings.ToLower(f.arg)) + ":" + action
			}
			fmt.Fprintf(&b, "                '%s' \\\n", spec)
		}
		switch {
		case argWords(c) != nil:
			fmt.Fprintf(&b, "                '*:argument:(%s)'\n", strings.Join(argWords(c), " "))
		case fileArg(c):
			b.WriteString("                '*:file:_files'\n")
		default:
			b.WriteString("                '*:argument: '\n")
		}
		b.WriteString("            ;;\n")
	}
	b.WriteString(`    esac
}
if [[ "$funcstack[1]" == _enqueue ]]; then
    _enqueue "$@"
else
    compdef _enqueue enqueue
fi
`)
	_, err := io.WriteString(w, b.String())
	return err
}

// fishQuote quotes s for fish: between single quotes.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(s) + "'"
}

// writeFish writes the fish completion script.
func writeFish(w io.Writer) error {
	var b strings.Builder
	b.WriteString(`# fish completion for enqueue, Cairn's CLI (written by: enqueue completion fish).
# Load it in this shell:     enqueue completion fish | source
# or for every new shell:    enqueue completion fish > ~/.config/fish/completions/enqueue.fish
complete -c enqueue -f
`)
	names := strings.Join(commandNames(), " ")
	for _, f := range flagsOf(nil) {
		fmt.Fprintf(&b, "complete -c enqueue -n %s -l %s -d %s\n", fishQuote("not __fish_seen_subcommand_from "+names),
			f.name, fishQuote(f.desc))
	}
	for _, c := range allCommands() {
		fmt.Fprintf(&b, "complete -c enqueue -n %s -a %s -d %s\n", fishQuote("not __fish_seen_subcommand_from "+names),
			c.name, fishQuote(shortDesc(c.summary)))
	}
	for _, c := range allCommands() {
		cond := fishQuote("__fish_seen_subcommand_from " + c.name)
		for _, f := range flagsOf(c) {
			line := fmt.Sprintf("complete -c enqueue -n %s -l %s", cond, f.name)
			if f.arg != "" {
				if vals := flagValues(f); vals != nil {
					line += " -x -a " + fishQuote(strings.Join(vals, " "))
				} else if strings.Contains(f.arg, "file") {
					line += " -r -F"
				} else {
					line += " -x"
				}
			}
			fmt.Fprintf(&b, "%s -d %s\n", line, fishQuote(f.desc))
		}
		if ws := argWords(c); ws != nil {
			fmt.Fprintf(&b, "complete -c enqueue -n %s -a %s\n", cond, fishQuote(strings.Join(ws, " ")))
		}
		if fileArg(c) {
			fmt.Fprintf(&b, "complete -c enqueue -n %s -F\n", cond)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
