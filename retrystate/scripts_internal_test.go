package retrystate

import (
	"io/fs"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/tasks"
)

// scriptBodies returns the scripts that need helpers (lua/lib) by file name.
func scriptBodies(t *testing.T) map[string]string {
	t.Helper()
	files, err := fs.Glob(luaFS, "lua/*.lua")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range files {
		if src := mustRead(f); strings.Contains(src, luaNeeds) {
			out[strings.TrimPrefix(f, "lua/")] = src
		}
	}
	if len(out) < 15 {
		t.Fatalf("found %d scripts that need helpers", len(out))
	}
	return out
}

// luaSources returns every Lua source, scripts and helpers, by path.
func luaSources(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, glob := range []string{"lua/*.lua", "lua/lib/*.lua"} {
		files, err := fs.Glob(luaFS, glob)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			out[f] = mustRead(f)
		}
	}
	return out
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

// defined returns the locals an assembled script declares at its top
// level.
func defined(t *testing.T, src string) map[string]bool {
	t.Helper()
	sc, err := scanLua(src)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, n := range sc.top {
		out[n] = true
	}
	return out
}

func TestAssembleKeepsWhatAScriptNeeds(t *testing.T) {
	t.Parallel()
	lib := luaHelpers()
	if len(lib) < 30 {
		t.Fatalf("lua/lib holds %d helpers; want every shared one (30 or more)", len(lib))
	}
	src := lib.assemble("begin.lua", mustRead("lua/begin.lua"))
	begin := defined(t, src)
	// begin needs fail_run, which needs notify and expire_run, and whose
	// sagas activate a compensation: kept through the chain; it never
	// reopens a run or activates a step itself: left out.
	for _, name := range []string{"RUN", "NOW", "IDX", "int", "step_get", "journal", "set_status", "fail_run", "notify",
		"expire_run", "activation"} {
		if !begin[name] {
			t.Errorf("the assembled begin.lua lacks %s", name)
		}
	}
	for _, name := range []string{"reopen", "auto_repair", "activate", "touch"} {
		if begin[name] {
			t.Errorf("the assembled begin.lua defines %s, which begin does not need", name)
		}
	}
	// A helper comes after those it needs: a local is in scope only below
	// its definition.
	for _, pair := range [][2]string{{"local function sp(", "local function step_get("},
		{"local function gates(", "local function fail_run("}, {"local JOURNAL =", "local function journal("}} {
		if i, j := strings.Index(src, pair[0]), strings.Index(src, pair[1]); i < 0 || j < 0 || i > j {
			t.Errorf("the assembled begin.lua: %q at %d, %q at %d; want both, in this order", pair[0], i, pair[1], j)
		}
	}
	if strings.Contains(src, luaNeeds) && strings.Index(src, luaNeeds) < strings.Index(src, "local idx =") &&
		!strings.Contains(src, "local function fail_run(") {
		t.Error("the assembled begin.lua still declares its needs instead of holding the helpers")
	}
}

// Every helper is needed by some script: the library must not hide dead
// code, and a helper no script takes is one no test runs.
func TestEveryHelperIsNeeded(t *testing.T) {
	t.Parallel()
	lib := luaHelpers()
	used := map[string]bool{}
	for name, body := range scriptBodies(t) {
		for n := range defined(t, lib.assemble(name, body)) {
			used[n] = true
		}
	}
	for _, n := range slices.Sorted(maps.Keys(lib)) {
		if !used[n] {
			t.Errorf("lua/lib/%s.lua: no script needs it", n)
		}
	}
}

func TestAssembleRefusesABadDeclaration(t *testing.T) {
	t.Parallel()
	lib := luaLib{
		"a": {needs: []string{"b"}, text: "-- needs: b\nlocal function a() return b() end\n"},
		"b": {needs: []string{"a"}, text: "-- needs: a\nlocal function b() return a() end\n"},
		"c": {text: "local c = 1\n"},
	}
	for _, tt := range []struct{ name, src string }{
		{"an unknown helper", "-- needs: c, d\nreturn c\n"},
		{"helpers that need each other", "-- needs: a\nreturn a()\n"},
		{"two declarations", "-- needs: c\nlocal x = c\n-- needs: c\nreturn x\n"},
		{"a declaration that ends with a comma", "-- needs: c,\nreturn c\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("assemble accepted %q", tt.src)
				}
			}()
			lib.assemble("x.lua", tt.src)
		})
	}
	if got := lib.assemble("x.lua", "local y = 2\n-- needs: c,\n--   c\nreturn c + y\n"); got !=
		"local y = 2\nlocal c = 1\n\nreturn c + y\n" {
		t.Errorf("assembled %q", got)
	}
}

// luaGlobals are the globals of Redis's Lua that the sources use.
var luaGlobals = map[string]bool{"redis": true, "string": true, "table": true, "math": true, "tonumber": true,
	"tostring": true, "type": true, "unpack": true, "select": true, "setmetatable": true, "rawset": true,
	"KEYS": true, "ARGV": true}

// luaRunNames are the locals every run-level script declares, which the
// helpers use.
var luaRunNames = map[string]bool{"RUN": true, "RUN_ID": true, "PREFIX": true, "NOWS": true}

// TestLuaNeedsAreUses holds the declarations the build goes by to the
// code: each helper file defines the local it is named for; each script
// and helper declares exactly the helpers whose locals it uses (found by
// a scope walk of its tokens: a local of its own named like a helper is
// not a use of it); a name that is neither a helper's, a global of Redis's
// Lua nor (in a helper) one of the run-level script's locals is an error;
// and each script declares, above its declaration of needs, the run-level
// locals its helpers use.
func TestLuaNeedsAreUses(t *testing.T) {
	t.Parallel()
	lib := luaHelpers()
	provider := map[string]string{} // a helper file's top-level local -> the file's name
	scans := map[string]luaScan{}
	for _, n := range slices.Sorted(maps.Keys(lib)) {
		sc, err := scanLua(lib[n].text)
		if err != nil {
			t.Fatalf("lua/lib/%s.lua: %v", n, err)
		}
		scans[n] = sc
		if !slices.Contains(sc.top, n) {
			t.Errorf("lua/lib/%s.lua does not define the local %s", n, n)
		}
		for _, l := range sc.top {
			if p, ok := provider[l]; ok {
				t.Errorf("lua/lib/%s.lua and %s.lua both define %s", p, n, l)
			}
			provider[l] = n
		}
	}
	// needs checks one source's declaration against its uses.
	needs := func(what string, declared []string, sc luaScan, self string, runNames bool) {
		t.Helper()
		used := map[string]bool{}
		for _, name := range slices.Sorted(maps.Keys(sc.free)) {
			switch p, ok := provider[name]; {
			case ok && p != self:
				used[p] = true
			case ok, luaGlobals[name], runNames && luaRunNames[name]:
			default:
				t.Errorf("%s uses %s (line %d), which is no helper's, no local of its own and no global of Redis's Lua",
					what, name, sc.free[name])
			}
		}
		if got, want := slices.Sorted(maps.Keys(used)), slices.Sorted(slices.Values(declared)); !slices.Equal(got, want) {
			t.Errorf("%s declares it needs %q; it uses %q", what, want, got)
		}
	}
	for _, n := range slices.Sorted(maps.Keys(lib)) {
		needs("lua/lib/"+n+".lua", lib[n].needs, scans[n], n, true)
	}
	for name, src := range scriptBodies(t) {
		before, declared, _ := cutNeeds(name, src)
		sc, err := scanLua(src)
		if err != nil {
			t.Fatalf("lua/%s: %v", name, err)
		}
		needs("lua/"+name, declared, sc, "", false)
		// The run-level locals the helpers it gets use.
		top, err := scanLua(before)
		if err != nil {
			t.Fatalf("lua/%s: %v", name, err)
		}
		mine := map[string]bool{}
		for _, l := range top.top {
			mine[l] = true
		}
		for n := range defined(t, lib.assemble(name, src)) {
			for r := range scans[n].free {
				if luaRunNames[r] && !mine[r] {
					t.Errorf("lua/%s gets %s, which uses %s; the script declares no such local above its needs",
						name, n, r)
				}
			}
		}
	}
}

// TestOnlyTasksSpellsAsynqsLayout: retrystate's Lua writes and reads
// asynq's task records only through the functions of package tasks
// (tasks.Lua: put_task, put_now, task_state, task_exists, task_id), which
// tasks.CheckAsynqWire checks against asynq at every worker's start: no
// string of its scripts or helpers names an asynq key, a field only
// asynq's records have, or the task ID's format. (asynq's keys that a
// script declares come in its KEYS, from Go.)
func TestOnlyTasksSpellsAsynqsLayout(t *testing.T) {
	t.Parallel()
	for path, src := range luaSources(t) {
		toks, err := luaLex(src)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, tok := range toks {
			if tok.kind != 's' {
				continue
			}
			for _, bad := range []string{"asynq:", "pending_since", "_s%d", "_a%d", "_g%d", `"_s"`, `"_a"`} {
				if strings.Contains(tok.text, bad) {
					t.Errorf("%s:%d: %s spells asynq's layout (%s); use tasks' Lua", path, tok.line, tok.text, bad)
				}
			}
		}
	}
	lib := luaHelpers()
	for _, n := range []string{"put_task", "put_now", "task_state", "task_exists", "task_id"} {
		want, err := fs.ReadFile(tasks.Lua(), n+".lua")
		if err != nil {
			t.Fatal(err)
		}
		if lib[n].text != string(want) {
			t.Errorf("the helper %s is not tasks' lua/%s.lua", n, n)
		}
	}
	for _, name := range []string{"complete.lua", "create.lua", "fail.lua", "repair.lua"} {
		src := lib.assemble(name, mustRead("lua/"+name))
		if !strings.Contains(src, "local function put_task(") && !strings.Contains(src, "local function put_now(") {
			t.Errorf("the assembled %s writes no task through tasks' Lua", name)
		}
	}
}
