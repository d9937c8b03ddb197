package retrystate

import (
	"embed"
	"fmt"
	"io/fs"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/cairnhq/cairn/tasks"
)

// The scripts (lua/*.lua) and the helpers they share (lua/lib/*.lua, and
// the functions of asynq's task records, tasks.Lua): see lua/README.md.
//
//go:embed lua/*.lua lua/lib/*.lua
var luaFS embed.FS

// scripts holds the loaded Lua scripts of the Stores. Each run-level script
// is its own file with the helpers it needs put in where it declares them
// (luaLib.assemble).
type scripts struct {
	create, begin, complete, fail, cancel, renew  *redis.Script
	redispatch, repair, timeout, operate, release *redis.Script
	unlock, peek, gate, restore                   *redis.Script
	wait, signal                                  *redis.Script
	snooze, jump                                  *redis.Script // snooze.lua, goto.lua
	compdone                                      *redis.Script
	journal                                       *redis.Script // journal.lua: a compact run's moved journal
	pause                                         *redis.Script // pause.lua: pause and resume
	retryNow                                      *redis.Script // retrynow.lua
}

// loadScripts returns the scripts, built once: every Store of the process
// shares them (a redis.Script is immutable).
var loadScripts = sync.OnceValue(buildScripts)

func buildScripts() scripts {
	lib := luaHelpers()
	script := func(name string) *redis.Script {
		return redis.NewScript(lib.assemble(name, mustRead("lua/"+name)))
	}
	return scripts{
		create:     script("create.lua"),
		begin:      script("begin.lua"),
		complete:   script("complete.lua"),
		fail:       script("fail.lua"),
		cancel:     script("cancel.lua"),
		renew:      script("renew.lua"),
		redispatch: script("redispatch.lua"),
		repair:     script("repair.lua"),
		timeout:    script("timeout.lua"),
		operate:    script("operate.lua"),
		release:    script("release.lua"),
		unlock:     script("unlock.lua"),
		peek:       script("peek.lua"),
		gate:       script("gate.lua"),
		restore:    script("restore.lua"),
		wait:       script("wait.lua"),
		signal:     script("signal.lua"),
		snooze:     script("snooze.lua"),
		jump:       script("goto.lua"),
		compdone:   script("compdone.lua"),
		journal:    script("journal.lua"),
		pause:      script("pause.lua"),
		retryNow:   script("retrynow.lua"),
	}
}

func mustRead(name string) string {
	b, err := luaFS.ReadFile(name)
	if err != nil { // embedded at build time: a missing file is a build bug
		panic("retrystate: " + err.Error())
	}
	return string(b)
}

// luaLib is the helpers the scripts share, by name: lib/<name>.lua (or
// tasks' lua/<name>.lua) defines the local <name> (a function or a value),
// after a line "-- needs: a, b" naming the helpers it uses, if any.
//
// Redis runs a script's whole body on every call, and each "local
// function" in it is a closure created anew each time (some 400
// instructions, more for each local it captures), so a script gets only
// the helpers it declares and those they declare, never a whole library.
// The declarations are the only input: nothing here reads the code (a test,
// TestLuaNeedsAreUses, holds the declarations to the names the code uses).
type luaLib map[string]luaHelper

// luaHelper is one file of the library.
type luaHelper struct {
	needs []string
	text  string
}

// luaHelpers returns the helpers of lua/lib and the functions by which
// the scripts write and read asynq's task records, which package tasks
// owns (tasks.Lua: the only code that knows asynq's layout).
func luaHelpers() luaLib {
	lib, err := fs.Sub(luaFS, "lua/lib")
	if err != nil {
		panic("retrystate: " + err.Error())
	}
	return mustReadLuaLib(lib, tasks.Lua())
}

// mustReadLuaLib reads the helpers, the *.lua files at the root of each of
// srcs (embedded at build time: an error is a build bug).
func mustReadLuaLib(srcs ...fs.FS) luaLib {
	lib := luaLib{}
	for _, src := range srcs {
		files, err := fs.Glob(src, "*.lua")
		if err != nil || len(files) == 0 {
			panic(fmt.Sprintf("retrystate: no Lua helpers: %v", err))
		}
		for _, f := range files {
			b, err := fs.ReadFile(src, f)
			if err != nil {
				panic("retrystate: " + err.Error())
			}
			text := string(b)
			h := luaHelper{text: text}
			if strings.HasPrefix(text, luaNeeds) {
				_, h.needs, _ = cutNeeds(f, text)
			}
			name := strings.TrimSuffix(f, ".lua")
			if _, dup := lib[name]; dup {
				panic("retrystate: two Lua helpers named " + name)
			}
			lib[name] = h
		}
	}
	return lib
}

// luaNeeds starts the line of a script or a helper that declares the
// helpers it uses.
const luaNeeds = "-- needs:"

// cutNeeds finds src's declaration "-- needs: a, b, c" (a line that ends
// with a comma continues on the next line, also a comment) and returns the
// text before it, the names and the text after it. A source without one
// needs nothing; one with two is a build bug.
func cutNeeds(name, src string) (before string, needs []string, after string) {
	i := -1
	switch {
	case strings.HasPrefix(src, luaNeeds):
		i = 0
	case strings.Contains(src, "\n"+luaNeeds):
		i = strings.Index(src, "\n"+luaNeeds) + 1
	}
	if i < 0 {
		return src, nil, ""
	}
	rest := src[i+len(luaNeeds):]
	var list strings.Builder
	for {
		line, more, _ := strings.Cut(rest, "\n")
		list.WriteString(line)
		rest = more
		if !strings.HasSuffix(strings.TrimSpace(line), ",") {
			break
		}
		next, ok := strings.CutPrefix(rest, "--")
		if !ok {
			panic(fmt.Sprintf("retrystate: %s: its needs end with a comma", name))
		}
		rest = next
	}
	for n := range strings.SplitSeq(list.String(), ",") {
		if n = strings.TrimSpace(n); n != "" {
			needs = append(needs, n)
		}
	}
	if strings.Contains(rest, "\n"+luaNeeds) {
		panic(fmt.Sprintf("retrystate: %s declares its needs twice", name))
	}
	return src[:i], needs, rest
}

// assemble returns script src (file name) with its declaration of needs
// replaced by the helpers it needs, directly or through other helpers,
// each after those it uses: a local is in scope only below its
// definition. An unknown helper or a cycle is a build bug.
func (l luaLib) assemble(name, src string) string {
	before, needs, after := cutNeeds(name, src)
	if needs == nil {
		return src
	}
	var b strings.Builder
	b.WriteString(before)
	done := map[string]bool{}
	var add func(n string, path []string)
	add = func(n string, path []string) {
		if done[n] {
			return
		}
		for _, p := range path {
			if p == n {
				panic(fmt.Sprintf("retrystate: %s: the helpers need each other: %s -> %s", name,
					strings.Join(path, " -> "), n))
			}
		}
		h, ok := l[n]
		if !ok {
			panic(fmt.Sprintf("retrystate: %s needs %s, which is no helper of lua/lib", name, n))
		}
		for _, d := range h.needs {
			add(d, append(path, n))
		}
		done[n] = true
		b.WriteString(h.text)
		b.WriteString("\n")
	}
	for _, n := range needs {
		add(n, nil)
	}
	b.WriteString(after)
	return b.String()
}
