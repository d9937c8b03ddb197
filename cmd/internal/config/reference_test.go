package config_test

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/cmd/internal/config"
	"github.com/cairnhq/cairn/workflow"
)

// The table of docs/configuration.md is generated from the Config struct:
//
//	go test ./cmd/internal/config -run TestConfigurationReference -update
//
// rewrites it between the markers; without -update the test fails when the
// file differs from what it would write.
var update = flag.Bool("update", false, "rewrite the generated table of docs/configuration.md")

// regenerate is the command that rewrites the table, quoted in failures.
const regenerate = "go test ./cmd/internal/config -run TestConfigurationReference -update"

const (
	referenceDoc = "docs/configuration.md"
	beginMarker  = "<!-- BEGIN GENERATED TABLE: " + regenerate + " -->"
	endMarker    = "<!-- END GENERATED TABLE -->"
)

// otherVariable is a variable documented in the table that code outside
// Config reads (os.Getenv). The table lists it after the variable After.
type otherVariable struct {
	Name, Default, Type, Meaning, ReadBy, After string
}

// otherVariables are the CAIRN_* variables of the worker and the CLI that
// are not fields of Config. Adding one here documents it; a CAIRN_*
// variable that non-test code names and that is neither here, nor in
// Config, nor in harnessVariables fails TestEveryVariableIsDocumented.
var otherVariables = []otherVariable{{
	Name:    "CAIRN_DEQUEUE",
	Default: "`" + workflow.DequeueCairn + "`",
	Type:    "string",
	Meaning: "who takes the queue's tasks: `" + workflow.DequeueCairn + "`, the worker's own dequeue, which blocks on the queue (a step starts the moment its task is pending; an idle worker makes a blocking call and one script call a second), or `" + workflow.DequeueAsynq + "`, asynq's processor, which polls every `CAIRN_TASK_CHECK_INTERVAL` (see [Performance](performance.md))",
	ReadBy:  "internal/engine (NewWorker, when WorkerConfig.Dequeue is empty)",
	After:   "CAIRN_SWEEP_INTERVAL",
}}

// harnessVariables are the CAIRN_* variables that non-test code reads for
// the test suites only (packages that only tests import); they configure
// the tests, not Cairn, and are not in the table. The variables of
// *_test.go files (CAIRN_BENCH_*, CAIRN_CHAOS_RUNS, ...) are not scanned.
var harnessVariables = map[string]string{
	"CAIRN_REDIS_SERVER":    "internal/redistest: the redis-server binary the tests start",
	"CAIRN_TEST_LOG":        "internal/testkit: the tests' logs to stderr",
	"CAIRN_TEST_BUILD_RACE": "internal/proctest: build the binaries under test with -race",
}

// A row of the table.
type row struct{ name, def, typ, meaning string }

// TestConfigurationReference checks that the table of docs/configuration.md
// is the one the Config struct gives, or, with -update, writes it.
func TestConfigurationReference(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	rows, err := referenceRows(filepath.Join(root, "cmd", "internal", "config", "config.go"))
	if err != nil {
		t.Fatal(err)
	}
	table := renderTable(rows)
	path := filepath.Join(root, filepath.FromSlash(referenceDoc))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	want, err := spliceTable(doc, table)
	if err != nil {
		t.Fatalf("%s: %v", referenceDoc, err)
	}
	if *update {
		if want != doc {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: table rewritten (%d variables)", referenceDoc, len(rows))
		}
		return
	}
	if want != doc {
		t.Errorf("%s: the table differs from what the Config struct gives (%s); regenerate it:\n\t%s",
			referenceDoc, firstDiff(doc, want), regenerate)
	}
}

// referenceRows returns the table's rows: Config's fields with an env tag,
// in order, with otherVariables after the variables they name.
func referenceRows(configGo string) ([]row, error) {
	docs, err := fieldDocs(configGo)
	if err != nil {
		return nil, err
	}
	var rows []row
	var errs []string
	for f := range reflect.TypeFor[config.Config]().Fields() {
		name, ok := f.Tag.Lookup("env")
		if !ok {
			continue
		}
		name, _, _ = strings.Cut(name, ",")
		meaning, err := meaningOf(f.Name, docs[f.Name])
		if err != nil {
			errs = append(errs, fmt.Sprintf("Config.%s (%s): %v", f.Name, name, err))
			continue
		}
		def := "(unset)"
		if d, ok := f.Tag.Lookup("envDefault"); ok {
			def = "`" + d + "`"
		}
		rows = append(rows, row{name, def, typeOf(f.Type), meaning})
	}
	for _, o := range otherVariables {
		i := slices.IndexFunc(rows, func(r row) bool { return r.name == o.After })
		if i < 0 {
			errs = append(errs, fmt.Sprintf("otherVariables: %s goes after %s, which is not in the table", o.Name, o.After))
			continue
		}
		rows = slices.Insert(rows, i+1, row{o.Name, o.Default, o.Type, o.Meaning})
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return rows, nil
}

// fieldDocs returns the doc comments of Config's fields, read from the
// source file (reflection does not see comments).
func fieldDocs(configGo string) (map[string]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), configGo, nil, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	docs := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != "Config" {
			return true
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			return false
		}
		for _, fld := range st.Fields.List {
			for _, id := range fld.Names {
				docs[id.Name] = fld.Doc.Text()
			}
		}
		return false
	})
	if len(docs) == 0 {
		return nil, fmt.Errorf("%s: no struct Config", configGo)
	}
	return docs, nil
}

// meaningOf turns a field's doc comment ("Field is ..." or "Field are
// ...") into the table's meaning column: the text after the verb, on one
// line, without its final period, with | escaped.
func meaningOf(field, doc string) (string, error) {
	doc = strings.Join(strings.Fields(doc), " ")
	if doc == "" {
		return "", fmt.Errorf("no doc comment: write one that starts %q; the rest is the variable's meaning in %s", field+" is", referenceDoc)
	}
	rest, ok := strings.CutPrefix(doc, field+" is ")
	if !ok {
		rest, ok = strings.CutPrefix(doc, field+" are ")
	}
	if !ok || rest == "" {
		return "", fmt.Errorf("the doc comment %q does not start %q or %q: the text after them is the variable's meaning in %s",
			truncate(doc, 40), field+" is ", field+" are ", referenceDoc)
	}
	rest = strings.TrimSuffix(rest, ".")
	return strings.ReplaceAll(rest, "|", `\|`), nil
}

// typeOf names a field's type as the table says it.
func typeOf(t reflect.Type) string {
	switch {
	case t == reflect.TypeFor[time.Duration]():
		return "duration"
	case t == reflect.TypeFor[config.Secret]():
		return "string (secret)"
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Int, reflect.Int64:
		return "integer"
	case reflect.Float64:
		return "number"
	case reflect.Bool:
		return "`true` or `false`"
	default:
		return t.String()
	}
}

func renderTable(rows []row) string {
	var b strings.Builder
	b.WriteString("| variable | default | type | meaning |\n|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", r.name, r.def, r.typ, r.meaning)
	}
	return b.String()
}

// spliceTable returns doc with the text between its markers replaced by
// table.
func spliceTable(doc, table string) (string, error) {
	i := strings.Index(doc, beginMarker+"\n")
	j := strings.Index(doc, "\n"+endMarker)
	if i < 0 || j < 0 || j < i {
		return "", fmt.Errorf("want the lines %q and %q around the generated table", beginMarker, endMarker)
	}
	if strings.Count(doc, beginMarker) != 1 || strings.Count(doc, endMarker) != 1 {
		return "", fmt.Errorf("want one %q and one %q", beginMarker, endMarker)
	}
	start := i + len(beginMarker) + 1
	return doc[:start] + table + doc[j+1:], nil
}

// firstDiff describes the first line where got and want differ.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			c := 0
			for c < len(gl) && c < len(wl) && gl[c] == wl[c] {
				c++
			}
			from := max(c-30, 0)
			return fmt.Sprintf("line %d, from column %d: %q, want %q", i+1, from+1, truncate(gl[from:], 80), truncate(wl[from:], 80))
		}
	}
	return "no line differs"
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// variableRE matches a CAIRN_* name in a string; a pattern (CAIRN_RETRY_*)
// is left out by the check of what follows.
var variableRE = regexp.MustCompile(`CAIRN_[A-Z0-9_]*[A-Z0-9]`)

// TestEveryVariableIsDocumented checks that every CAIRN_* variable the
// module's non-test Go code names, in any string literal (os.Getenv's
// argument, a constant, an error message), is in the table (a Config field
// or otherVariables) or a test-harness variable (harnessVariables), and
// that those two lists name no variable the code no longer reads.
func TestEveryVariableIsDocumented(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	found, err := variablesInCode(root)
	if err != nil {
		t.Fatal(err)
	}
	inTable := map[string]bool{}
	for f := range reflect.TypeFor[config.Config]().Fields() {
		if name, ok := f.Tag.Lookup("env"); ok {
			name, _, _ = strings.Cut(name, ",")
			inTable[name] = true
		}
	}
	for _, o := range otherVariables {
		if inTable[o.Name] {
			t.Errorf("otherVariables: %s is a field of Config already", o.Name)
		}
		inTable[o.Name] = true
		if len(found[o.Name]) == 0 {
			t.Errorf("otherVariables: no non-test Go code names %s any more: remove it", o.Name)
		}
	}
	for name := range harnessVariables {
		if len(found[name]) == 0 {
			t.Errorf("harnessVariables: no non-test Go code names %s any more: remove it", name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(found)) {
		if inTable[name] || harnessVariables[name] != "" {
			continue
		}
		t.Errorf("%s names %s, which docs/configuration.md does not document: add it to config.Config "+
			"(with an env tag and a doc comment, then run %s), or, when other code reads it, to otherVariables in %s",
			found[name][0], name, regenerate, "cmd/internal/config/reference_test.go")
	}
	if len(found) < 30 {
		t.Fatalf("found only %d CAIRN_* variables in the code under %s: is the scan broken?", len(found), root)
	}
}

// variablesInCode returns the CAIRN_* names in the string literals of the
// module's non-test Go files, each with the places (FILE:LINE) that name
// it. testdata, node_modules and dot folders are not walked.
func variablesInCode(root string) (map[string][]string, error) {
	found := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				s = lit.Value
			}
			for _, m := range variableRE.FindAllStringIndex(s, -1) {
				if strings.HasPrefix(s[m[1]:], "_*") || strings.HasPrefix(s[m[1]:], "*") {
					continue // a pattern, not a variable
				}
				pos := fset.Position(lit.Pos())
				rel, _ := filepath.Rel(root, pos.Filename)
				v := s[m[0]:m[1]]
				found[v] = append(found[v], fmt.Sprintf("%s:%d", filepath.ToSlash(rel), pos.Line))
			}
			return true
		})
		return nil
	})
	return found, err
}

// moduleRoot returns the directory of the module's go.mod, above the
// test's working directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}

// tableRowRE matches a row of a Markdown table that starts with a CAIRN_*
// variable and its default: | `CAIRN_X` | `value` or (unset) | ...
var tableRowRE = regexp.MustCompile("^\\| `(CAIRN_[A-Z0-9_]+)` \\| (`[^`|]*`|\\(unset\\)) \\|")

// TestOtherTablesAgree checks the other Markdown files' tables of variables
// (docs/http-api.md, docs/yaml.md have a few rows each) against the
// generated table: a variable it does not know, or another default, fails.
func TestOtherTablesAgree(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	rows, err := referenceRows(filepath.Join(root, "cmd", "internal", "config", "config.go"))
	if err != nil {
		t.Fatal(err)
	}
	defaults := map[string]string{}
	for _, r := range rows {
		defaults[r.name] = r.def
	}
	checked := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && (d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		if !strings.HasSuffix(p, ".md") || filepath.ToSlash(rel) == referenceDoc {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			m := tableRowRE.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			checked++
			def, ok := defaults[m[1]]
			switch {
			case !ok:
				t.Errorf("%s:%d: %s is not in %s", filepath.ToSlash(rel), i+1, m[1], referenceDoc)
			case def != m[2]:
				t.Errorf("%s:%d: %s's default is %s here, %s in %s (the Config struct)", filepath.ToSlash(rel), i+1, m[1], m[2], def, referenceDoc)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("no table row of a CAIRN_* variable found outside " + referenceDoc + ": is the pattern broken?")
	}
}

// TestReferenceHelpers holds the generator's helpers to the cases they
// must refuse.
func TestReferenceHelpers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ field, doc, want string }{
		{"Queue", "Queue is the asynq queue.\n", "the asynq queue"},
		{"Events", "Events are the types, a|b.", `the types, a\|b`},
		{"Queue", "Queue names the queue.", ""},
		{"Queue", "The queue is Queue.", ""},
		{"Queue", "", ""},
		{"Queue", "Queue is ", ""},
	} {
		got, err := meaningOf(c.field, c.doc)
		if c.want == "" {
			if err == nil {
				t.Errorf("meaningOf(%q) = %q, want an error", c.doc, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("meaningOf(%q) = %q, %v; want %q", c.doc, got, err, c.want)
		}
	}
	doc := "# T\n\nprose\n" + beginMarker + "\nold\n" + endMarker + "\nmore prose\n"
	got, err := spliceTable(doc, "| new |\n")
	if want := "# T\n\nprose\n" + beginMarker + "\n| new |\n" + endMarker + "\nmore prose\n"; err != nil || got != want {
		t.Errorf("spliceTable = %q, %v; want %q", got, err, want)
	}
	for _, bad := range []string{"no markers", endMarker + "\n" + beginMarker + "\n", doc + doc} {
		if _, err := spliceTable(bad, "x\n"); err == nil {
			t.Errorf("spliceTable(%q): no error", bad)
		}
	}
}

// deploymentVarRE matches a CAIRN_* variable a deployment file sets for
// the binaries: a key of a compose service's environment map (CAIRN_X:),
// an item of its list form (- CAIRN_X=), or a Dockerfile's ENV CAIRN_X.
var deploymentVarRE = regexp.MustCompile(`^\s*(?:-\s*|ENV\s+)?(CAIRN_[A-Z0-9_]+)\s*[:=\s]`)

// TestDeploymentVariablesAreDocumented checks that docker-compose.yml and
// the Dockerfile set only variables of the table: a misspelt one would be
// ignored by the binaries without a word. Variables compose itself reads
// (${CAIRN_DASHBOARD_BIND:-...}) are not set for the binaries and are
// not checked.
func TestDeploymentVariablesAreDocumented(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	rows, err := referenceRows(filepath.Join(root, "cmd", "internal", "config", "config.go"))
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, r := range rows {
		known[r.name] = true
	}
	n := 0
	for _, name := range []string{"docker-compose.yml", "Dockerfile"} {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			m := deploymentVarRE.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			n++
			if !known[m[1]] {
				t.Errorf("%s:%d sets %s, which the binaries do not read (not in %s)", name, i+1, m[1], referenceDoc)
			}
		}
	}
	if n == 0 {
		t.Fatal("docker-compose.yml sets no CAIRN_* variable: is deploymentVarRE broken?")
	}
}

// TestDocumentedVariablesExist checks the other way round: every CAIRN_*
// name of a Markdown file is one that the code (Go, test files included),
// docker-compose.yml, the Dockerfile or the Makefile names, so that a
// renamed or removed variable does not live on in the docs. CHANGELOG.md
// and docs/design-history.md, which tell of the past, are left out.
func TestDocumentedVariablesExist(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	inCode := map[string]bool{}
	type mention struct{ where, name string }
	var inDocs []mention
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (name == "node_modules" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		isDoc := strings.HasSuffix(name, ".md") && !strings.Contains(rel, "testdata/") &&
			rel != "CHANGELOG.md" && rel != "docs/design-history.md"
		isCode := strings.HasSuffix(name, ".go") || rel == "docker-compose.yml" || rel == "Dockerfile" || rel == "Makefile"
		if !isDoc && !isCode {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range variableRE.FindAllStringIndex(line, -1) {
				if strings.HasPrefix(line[m[1]:], "_*") || strings.HasPrefix(line[m[1]:], "*") {
					continue // a pattern, not a variable
				}
				if isCode {
					inCode[line[m[0]:m[1]]] = true
				} else {
					inDocs = append(inDocs, mention{fmt.Sprintf("%s:%d", rel, i+1), line[m[0]:m[1]]})
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range inDocs {
		if !inCode[m.name] {
			t.Errorf("%s: %s: no code, docker-compose.yml, Dockerfile or Makefile names it (renamed? removed?)", m.where, m.name)
		}
	}
	if len(inDocs) < 50 {
		t.Fatalf("found %d mentions of CAIRN_* variables in the Markdown files: is the scan broken?", len(inDocs))
	}
}
