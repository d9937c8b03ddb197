package retrystate

import (
	"fmt"
	"io/fs"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// scriptArgs maps each script to the struct of its KEYS and ARGV (args.go).
var scriptArgs = map[string]luaArgs{
	"create.lua": createLua{}, "begin.lua": beginLua{}, "complete.lua": completeLua{},
	"compdone.lua": checkpointLua{}, "fail.lua": failLua{}, "snooze.lua": snoozeLua{}, "goto.lua": gotoLua{},
	"release.lua": releaseLua{}, "cancel.lua": cancelLua{}, "renew.lua": renewLua{},
	"redispatch.lua": redispatchLua{}, "repair.lua": repairLua{}, "timeout.lua": timeoutLua{},
	"operate.lua": operateLua{}, "restore.lua": restoreLua{}, "gate.lua": gateLua{}, "wait.lua": waitLua{},
	"signal.lua": signalLua{}, "unlock.lua": unlockLua{}, "peek.lua": peekLua{}, "journal.lua": journalLua{},
	"pause.lua":    pauseLua{},
	"retrynow.lua": retryNowLua{},
}

// luaHeader is what a script's header declares: its KEYS and its ARGV, by
// name, in order. A member of a repeated block (an entry ".name" after the
// entry "steps" that counts the blocks) is named "steps.name".
type luaHeader struct {
	keys, argv []string
}

// parseHeader reads the KEYS and ARGV sections of a script's leading
// comment: a line "-- KEYS" or "-- ARGV", then one entry per line, "--",
// three spaces and the names (a comma-separated list, up to two spaces or
// the end of the line); a line indented further goes on with an entry's
// description, any other line ends the section.
func parseHeader(src string) (luaHeader, error) {
	var h luaHeader
	var section *[]string
	group := ""
	for line := range strings.SplitSeq(src, "\n") {
		if !strings.HasPrefix(line, "--") {
			break
		}
		switch rest := strings.TrimPrefix(line, "--"); {
		case rest == " KEYS":
			section, group = &h.keys, ""
		case rest == " ARGV":
			section, group = &h.argv, ""
		case section != nil && strings.HasPrefix(rest, "    "):
			// The description goes on.
		case section != nil && strings.HasPrefix(rest, "   ") && rest[3] != ' ':
			names, _, _ := strings.Cut(rest[3:], "  ")
			for n := range strings.SplitSeq(names, ", ") {
				switch {
				case !luaName(strings.TrimPrefix(n, ".")):
					return h, fmt.Errorf("%q: %q is not a name", line, n)
				case strings.HasPrefix(n, "."):
					if group == "" {
						return h, fmt.Errorf("%q: a member of no block", line)
					}
					n = group + n
				default:
					group = n
				}
				*section = append(*section, n)
			}
		default:
			section = nil
		}
	}
	return h, nil
}

func luaName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if c != '_' && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// base drops a block member's block: "steps.name" -> "name".
func base(name string) string {
	_, after, ok := strings.Cut(name, ".")
	if ok {
		return after
	}
	return name
}

// TestScriptsReadTheirArgsByName: no script or helper reads KEYS or ARGV
// by index; each script reads its KEYS and ARGV in one statement each
// ("local RUN, next_task = unpack(KEYS)"), or for a repeated block in one
// statement per block at a cursor, into locals named as its header names
// them, in the header's order; and a helper that reads the run-level
// arguments itself reads them from the first, under the names every
// script that gets it gives them.
func TestScriptsReadTheirArgsByName(t *testing.T) {
	t.Parallel()
	indexed := 0
	for path, src := range luaSources(t) {
		sc, err := scanLua(src)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, line := range sc.indexed {
			t.Errorf("%s:%d reads KEYS or ARGV by index", path, line)
			indexed++
		}
	}
	lib := luaHelpers()
	files, err := fs.Glob(luaFS, "lua/*.lua")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := strings.TrimPrefix(f, "lua/")
		src := mustRead(f)
		h, err := parseHeader(src)
		if err != nil {
			t.Fatalf("%s: its header: %v", f, err)
		}
		sc, err := scanLua(src)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		read := map[string][]string{}
		for i, u := range sc.unpacks {
			if i == 0 && u.from != "1" || u.top && u.from != "1" && u.from != "at" {
				t.Errorf("%s:%d: unpack(%s, %s ...): want the first read from 1, the others at the cursor at", f,
					u.line, u.of, u.from)
			}
			read[u.of] = append(read[u.of], u.names...)
		}
		for _, part := range []struct {
			of     string
			header []string
		}{{"KEYS", h.keys}, {"ARGV", h.argv}} {
			want := make([]string, len(part.header))
			for i, n := range part.header {
				want[i] = base(n)
			}
			if got := read[part.of]; !slices.Equal(got, want) {
				t.Errorf("%s reads its %s into %q; its header names %q", f, part.of, got, want)
			}
		}
		// The helpers it gets that read the run-level arguments themselves.
		for n := range defined(t, lib.assemble(name, src)) {
			helper, ok := lib[n]
			if !ok {
				continue
			}
			hs, err := scanLua(helper.text)
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range hs.unpacks {
				header := h.keys
				if u.of == "ARGV" {
					header = h.argv
				}
				for i, v := range u.names {
					if u.from != "1" || v != "_" && (i >= len(header) || header[i] != v) {
						t.Errorf("lua/lib/%s.lua reads %s %d as %s from %s; %s names it %q", n, u.of, i+1, v,
							u.from, f, header)
					}
				}
			}
		}
	}
	t.Logf("reads of KEYS or ARGV by index: %d", indexed)
}

// TestScriptArgsFollowTheHeaders: the struct of each script's arguments
// (args.go) returns them in the order the script's header names them.
// Each field is given a value of its own (each repeated block a number of
// elements of its own), so that each value args returns names the field it
// came from; a block's count is the length of its slice.
func TestScriptArgsFollowTheHeaders(t *testing.T) {
	t.Parallel()
	files, err := fs.Glob(luaFS, "lua/*.lua")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := strings.TrimPrefix(f, "lua/")
		a, ok := scriptArgs[name]
		if !ok {
			t.Errorf("%s has no struct of its arguments in scriptArgs", f)
			continue
		}
		h, err := parseHeader(mustRead(f))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		s := sentinels{byValue: map[string]string{}, counts: map[int64]string{}, lens: map[string]int{}}
		v := reflect.New(reflect.TypeOf(a)).Elem()
		s.fill(t, v, "")
		la, ok := reflect.TypeAssert[luaArgs](v)
		if !ok {
			t.Fatalf("%T is no luaArgs", v.Interface())
		}
		keys, argv := la.args()
		var gotKeys, gotArgv []string
		for _, k := range keys {
			gotKeys = append(gotKeys, s.name(k))
		}
		for _, x := range argv {
			gotArgv = append(gotArgv, s.name(x))
		}
		// The header's names, each block's members once per element.
		var wantArgv []string
		for i := 0; i < len(h.argv); i++ {
			n := h.argv[i]
			wantArgv = append(wantArgv, n)
			var members []string
			for i+1 < len(h.argv) && strings.HasPrefix(h.argv[i+1], n+".") {
				i++
				members = append(members, h.argv[i])
			}
			for range s.lens[n] {
				wantArgv = append(wantArgv, members...)
			}
		}
		if !slices.Equal(gotKeys, h.keys) {
			t.Errorf("%s: %T.args returns the KEYS %q; the header names %q", f, a, gotKeys, h.keys)
		}
		if !slices.Equal(gotArgv, wantArgv) {
			t.Errorf("%s: %T.args returns the ARGV\n%q\nthe header names\n%q", f, a, gotArgv, wantArgv)
		}
	}
	for name := range scriptArgs {
		if _, err := fs.Stat(luaFS, "lua/"+name); err != nil {
			t.Errorf("scriptArgs has %s, which is no script", name)
		}
	}
}

// sentinels gives each field of a script's struct a value of its own.
type sentinels struct {
	n       int
	byValue map[string]string // a value, formatted -> its field's name
	counts  map[int64]string  // a block's length -> its name
	lens    map[string]int    // a block's name -> its length
}

func (s *sentinels) fill(t *testing.T, v reflect.Value, group string) {
	t.Helper()
	for i := range v.NumField() {
		f, fv := v.Type().Field(i), v.Field(i)
		if f.Anonymous {
			s.fill(t, fv, group)
			continue
		}
		name := f.Tag.Get("key")
		if name == "" {
			name = f.Tag.Get("arg")
		}
		if name == "" {
			t.Fatalf("%s.%s has no tag key or arg", v.Type(), f.Name)
		}
		if group != "" {
			name = group + "." + name
		}
		s.n++
		switch {
		case fv.Kind() == reflect.String:
			fv.SetString(fmt.Sprintf("v%d", s.n))
		case fv.Kind() == reflect.Int || fv.Kind() == reflect.Int64:
			fv.SetInt(int64(1000 + s.n))
		case fv.Type() == reflect.TypeFor[[]byte]():
			fv.SetBytes([]byte(fmt.Sprintf("v%d", s.n)))
		case fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.Struct:
			n := len(s.lens) + 1 // a length of its own: 1, 2, 3, ...
			s.lens[name], s.counts[int64(n)] = n, name
			fv.Set(reflect.MakeSlice(fv.Type(), n, n))
			for j := range n {
				s.fill(t, fv.Index(j), name)
			}
			continue
		default:
			t.Fatalf("%s.%s: no sentinel for a %s", v.Type(), f.Name, fv.Type())
		}
		s.byValue[fmt.Sprint(fv.Interface())] = name
		if fv.Type() == reflect.TypeFor[[]byte]() {
			s.byValue[string(fv.Bytes())] = name
		}
	}
}

// name returns the name of the field value x came from.
func (s *sentinels) name(x any) string {
	switch x := x.(type) {
	case []byte:
		if n, ok := s.byValue[string(x)]; ok {
			return n
		}
	case int:
		if n, ok := s.counts[int64(x)]; ok {
			return n
		}
	case int64:
		if n, ok := s.counts[x]; ok {
			return n
		}
	}
	if n, ok := s.byValue[fmt.Sprint(x)]; ok {
		return n
	}
	return fmt.Sprintf("(%v, from no field)", x)
}
