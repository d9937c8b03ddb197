package retrystate

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"
)

// scriptBodies returns the run-level scripts (those that take common.lua)
// by file name.
func scriptBodies(t *testing.T) map[string]string {
	t.Helper()
	files, err := fs.Glob(luaFS, "lua/*.lua")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range files {
		name := strings.TrimPrefix(f, "lua/")
		switch name {
		case "common.lua", "renew.lua", "unlock.lua", "peek.lua": // standalone
			continue
		}
		out[name] = mustRead(f)
	}
	return out
}

func defined(prelude string) map[string]bool {
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^local (?:function )?([A-Za-z_][A-Za-z0-9_]*)`).FindAllStringSubmatch(prelude, -1) {
		out[m[1]] = true
	}
	return out
}

func TestPreludeKeepsWhatAScriptUses(t *testing.T) {
	t.Parallel()
	c := parseCommon(mustRead("lua/common.lua"))
	if len(c.defs) < 20 {
		t.Fatalf("common.lua cut into %d definitions; want every top-level local (20 or more)", len(c.defs))
	}
	begin := defined(c.prelude(mustRead("lua/begin.lua")))
	// begin calls fail_run, which calls notify and expire_run, and whose
	// sagas activate a compensation: kept through the chain; it never
	// reopens a run or activates a step itself: dropped.
	for _, name := range []string{"RUN", "NOW", "IDX", "int", "step_get", "journal", "set_status", "fail_run", "notify", "expire_run", "activation"} {
		if !begin[name] {
			t.Errorf("begin's prelude lacks %s", name)
		}
	}
	for _, name := range []string{"reopen", "auto_repair", "activate", "touch"} {
		if begin[name] {
			t.Errorf("begin's prelude defines %s, which begin does not use", name)
		}
	}
	// Definitions keep their order: each only uses those above it.
	p := c.prelude(mustRead("lua/complete.lua"))
	if i, j := strings.Index(p, "local function int("), strings.Index(p, "local function activation("); i < 0 || j < 0 || i > j {
		t.Errorf("complete's prelude: int at %d, activation at %d; want both, int first", i, j)
	}
}

// Every definition of common.lua is used by some script: the cut must not
// hide dead code, and a definition no script keeps is one no test runs.
func TestEveryCommonDefinitionIsUsed(t *testing.T) {
	t.Parallel()
	c := parseCommon(mustRead("lua/common.lua"))
	used := map[string]bool{}
	for _, body := range scriptBodies(t) {
		for name := range defined(c.prelude(body)) {
			used[name] = true
		}
	}
	for _, d := range c.defs {
		for _, n := range d.names {
			if !used[n] {
				t.Errorf("common.lua defines %s, which no script uses", n)
			}
		}
	}
}

func TestParseCommonRefusesAStrayStatement(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Error("parseCommon accepted a top-level statement that is not a local definition")
		}
	}()
	parseCommon("-- header\n\nlocal A = 1\nredis.call(\"DEL\", KEYS[1])\n")
}
