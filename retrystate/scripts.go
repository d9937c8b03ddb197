package retrystate

import (
	"embed"
	"regexp"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var luaFS embed.FS

// scripts holds the loaded Lua scripts of the Stores. Each run-level script is
// the part of common.lua it uses followed by the script's own file.
type scripts struct {
	create, begin, complete, fail, cancel, renew  *redis.Script
	redispatch, repair, timeout, operate, release *redis.Script
	unlock, peek, gate                            *redis.Script
	wait, signal                                  *redis.Script
	snooze, jump                                  *redis.Script // snooze.lua, goto.lua
	compdone                                      *redis.Script
	journal                                       *redis.Script // journal.lua: a compact run's moved journal
}

// loadScripts returns the scripts, built once: every Store of the process
// shares them (a redis.Script is immutable), as building them takes some
// 40ms of regexp matching (commonLua.prelude), which each Engine, Client
// and reconciler would otherwise pay again.
var loadScripts = sync.OnceValue(buildScripts)

func buildScripts() scripts {
	common := parseCommon(mustRead("lua/common.lua"))
	withCommon := func(name string) *redis.Script {
		return redis.NewScript(common.prelude(mustRead("lua/" + name)))
	}
	return scripts{
		create:     withCommon("create.lua"),
		begin:      withCommon("begin.lua"),
		complete:   withCommon("complete.lua"),
		fail:       withCommon("fail.lua"),
		cancel:     withCommon("cancel.lua"),
		renew:      redis.NewScript(mustRead("lua/renew.lua")),
		redispatch: withCommon("redispatch.lua"),
		repair:     withCommon("repair.lua"),
		timeout:    withCommon("timeout.lua"),
		operate:    withCommon("operate.lua"),
		release:    withCommon("release.lua"),
		unlock:     redis.NewScript(mustRead("lua/unlock.lua")),
		peek:       redis.NewScript(mustRead("lua/peek.lua")),
		gate:       withCommon("gate.lua"),
		wait:       withCommon("wait.lua"),
		signal:     withCommon("signal.lua"),
		snooze:     withCommon("snooze.lua"),
		jump:       withCommon("goto.lua"),
		compdone:   withCommon("compdone.lua"),
		journal:    redis.NewScript(mustRead("lua/journal.lua")),
	}
}

func mustRead(name string) string {
	b, err := luaFS.ReadFile(name)
	if err != nil { // embedded at build time: a missing file is a build bug
		panic("retrystate: " + err.Error())
	}
	return string(b)
}

// commonLua is common.lua cut into its top-level definitions.
//
// Redis runs a script's whole body on every call, and every "local
// function" of the prelude is a closure created anew each time: with
// common.lua's 20-odd helpers that is about 30,000 instructions per call
// (measured with callgrind), a tenth of a step's begin. So each script gets
// only the definitions it uses, directly or through other definitions.
type commonLua struct {
	header string // the leading comment
	defs   []luaDef
}

// luaDef is one top-level statement of common.lua that starts with "local",
// with the comment above it.
type luaDef struct {
	names []string // the locals it defines
	text  string
}

var (
	luaLocal = regexp.MustCompile(`^local\s+(?:function\s+)?([A-Za-z_][A-Za-z0-9_]*(?:\s*,\s*[A-Za-z_][A-Za-z0-9_]*)*)`)
	luaIdent = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)
)

// parseCommon cuts common.lua at each line that starts a top-level "local"
// statement (or the comment block above one). Lines that start at column 0
// otherwise ("end", "end})") close the statement before them.
func parseCommon(src string) commonLua {
	var c commonLua
	var comment, cur []string
	var names []string
	flush := func() {
		if names != nil {
			c.defs = append(c.defs, luaDef{names: names, text: strings.Join(cur, "\n")})
		}
		names, cur = nil, nil
	}
	for line := range strings.SplitSeq(src, "\n") {
		switch {
		case strings.HasPrefix(line, "--") || strings.TrimSpace(line) == "":
			if names == nil && len(c.defs) == 0 && comment == nil && cur == nil {
				c.header += line + "\n" // the file's leading comment
				continue
			}
			if strings.TrimSpace(line) == "" {
				flush()
				comment = nil
				continue
			}
			if names != nil {
				flush()
			}
			comment = append(comment, line)
		case luaLocal.MatchString(line):
			flush()
			m := luaLocal.FindStringSubmatch(line)
			for n := range strings.SplitSeq(m[1], ",") {
				names = append(names, strings.TrimSpace(n))
			}
			// The definition's text starts with the comment block above it.
			comment = append(comment, line)
			cur, comment = comment, nil
		default:
			// Inside a definition: indented, or the "end" that closes it.
			// Anything else at column 0 is a statement of its own, which
			// no script could select.
			indented := line[0] == ' ' || line[0] == '\t'
			if names == nil || (!indented && !strings.HasPrefix(line, "end")) {
				panic("retrystate: common.lua: a statement outside a local definition: " + line)
			}
			cur = append(cur, line)
		}
	}
	flush()
	return c
}

// prelude returns body preceded by the definitions of common.lua it needs.
func (c commonLua) prelude(body string) string {
	need := map[string]bool{}
	for _, id := range luaIdent.FindAllString(stripLuaComments(body), -1) {
		need[id] = true
	}
	// A definition can only use the ones above it: one pass from the
	// bottom up collects the closure.
	keep := make([]bool, len(c.defs))
	for i := len(c.defs) - 1; i >= 0; i-- {
		d := c.defs[i]
		for _, n := range d.names {
			if need[n] {
				keep[i] = true
			}
		}
		if keep[i] {
			for _, id := range luaIdent.FindAllString(stripLuaComments(d.text), -1) {
				need[id] = true
			}
		}
	}
	var b strings.Builder
	b.WriteString(c.header)
	for i, d := range c.defs {
		if keep[i] {
			b.WriteString(d.text)
			b.WriteString("\n\n")
		}
	}
	b.WriteString(body)
	return b.String()
}

// stripLuaComments drops "--" comments (the scripts have no "--" inside
// strings).
func stripLuaComments(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if code, _, ok := strings.Cut(l, "--"); ok {
			lines[i] = code
		}
	}
	return strings.Join(lines, "\n")
}
