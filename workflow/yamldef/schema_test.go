package yamldef_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/cairnhq/cairn/workflow/yamldef"
)

// The JSON Schema of the YAML format (schema.json) is tested against the
// loader's own fixtures: every file the loader accepts, the schema accepts;
// every file the loader refuses for its shape (an unknown key, a value of
// the wrong type, a bad enum value, name, duration or number), the schema
// refuses too. What a schema cannot see (templates, which steps a template
// reads, unique names, the worker's defaults, hosts a URL may render) is
// the loader's alone: those cases are listed in parserOnly, and a case
// listed there that the schema does refuse is an error too, so that the
// list stays exact. Validation uses github.com/santhosh-tekuri/jsonschema,
// a test-only dependency.

// compileSchema compiles schema.json.
func compileSchema(t *testing.T) (*jsonschema.Schema, any) {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(yamldef.Schema()))
	if err != nil {
		t.Fatalf("schema.json is not JSON: %v", err)
	}
	id, _ := doc.(map[string]any)["$id"].(string)
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(id, doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(id)
	if err != nil {
		t.Fatalf("schema.json does not compile: %v", err)
	}
	return sch, doc
}

// instance converts a YAML file into the JSON value an editor validates:
// mappings with string keys, aliases and merge keys resolved. A file that
// is not YAML (a syntax error, a duplicate key, a bad merge) is an error:
// an editor reports it before any schema. .inf is taken as the largest
// number, .nan as a string (JSON has neither).
func instance(src string) (any, error) {
	var v any
	if err := yaml.Unmarshal([]byte(src), &v); err != nil {
		return nil, err
	}
	var conv func(any) any
	conv = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				x[k] = conv(e)
			}
			return x
		case map[any]any:
			out := make(map[string]any, len(x))
			for k, e := range x {
				out[fmt.Sprint(k)] = conv(e)
			}
			return out
		case []any:
			for i, e := range x {
				x[i] = conv(e)
			}
			return x
		case float64:
			switch {
			case math.IsNaN(x):
				return ".nan"
			case math.IsInf(x, 1):
				return math.MaxFloat64
			case math.IsInf(x, -1):
				return -math.MaxFloat64
			}
		}
		return v
	}
	// Through JSON, as an editor has it: numbers as json.Number, no Go
	// types the validator does not know.
	b, err := json.Marshal(conv(v))
	if err != nil {
		return nil, err
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(b))
}

// TestSchemaIsValidJSONSchema: schema.json is a draft 2020-12 JSON Schema
// (checked against the draft's meta-schema), every $defs entry is used,
// and every regular expression is one that ECMA-262 engines (editors) and
// Go's RE2 read alike: no lookaround, no backreference.
func TestSchemaIsValidJSONSchema(t *testing.T) {
	t.Parallel()
	_, doc := compileSchema(t)
	m, _ := doc.(map[string]any)
	if m["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("$schema %v, want draft 2020-12", m["$schema"])
	}
	meta, err := jsonschema.NewCompiler().Compile("https://json-schema.org/draft/2020-12/schema")
	if err != nil {
		t.Fatal(err)
	}
	if err := meta.Validate(doc); err != nil {
		t.Fatalf("schema.json is not a valid draft 2020-12 schema: %v", err)
	}
	text := string(yamldef.Schema())
	defs, _ := m["$defs"].(map[string]any)
	if len(defs) == 0 {
		t.Error("no $defs")
	}
	for name := range defs {
		if !strings.Contains(text, `"#/$defs/`+name+`"`) {
			t.Errorf("$defs/%s is not used", name)
		}
	}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if p, ok := x["pattern"].(string); ok {
				if strings.Contains(p, "(?") || regexp.MustCompile(`\\[1-9]`).MatchString(p) {
					t.Errorf("pattern %q: lookaround, flags or a backreference", p)
				}
				if _, err := regexp.Compile(p); err != nil {
					t.Errorf("pattern %q: %v", p, err)
				}
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(doc)
}

// validFixtures returns the workflows files of the repository that the
// loader accepts, by where they come from: every string constant of this
// package's tests that is a whole file (with %s and %[N]s, the URLs of
// test servers, filled in), the YAML blocks of the README and docs, and
// the examples of the package's documentation.
func validFixtures(t *testing.T) map[string]string {
	t.Helper()
	candidates := map[string]string{}
	add := func(where, src string) {
		if strings.Contains(src, "workflows:") {
			candidates[where] = src
		}
	}
	fset := token.NewFileSet()
	tests, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	verb := regexp.MustCompile(`%(\[\d+\])?s`)
	for _, name := range tests {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				t.Fatalf("%s: %v", fset.Position(lit.Pos()), err)
			}
			s = verb.ReplaceAllString(s, "http://127.0.0.1:8080")
			add(fset.Position(lit.Pos()).String(), s)
			return true
		})
	}
	docs, _ := filepath.Glob("../../docs/*.md")
	for _, name := range append([]string{"../../README.md"}, docs...) {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for i, block := range strings.Split(string(data), "```yaml\n")[1:] {
			block, _, _ = strings.Cut(block, "```")
			add(fmt.Sprintf("%s: yaml block %d", name, i+1), block)
		}
	}
	// The package documentation's examples: its indented blocks.
	data, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var block []string
	n := 0
	for line := range strings.SplitSeq(string(data)+"\n", "\n") {
		if code, ok := strings.CutPrefix(line, "//\t"); ok {
			block = append(block, code)
			continue
		}
		if len(block) > 0 {
			n++
			add(fmt.Sprintf("doc.go: example %d", n), strings.Join(block, "\n")+"\n")
			block = nil
		}
	}

	valid := map[string]string{}
	for where, src := range candidates {
		if _, err := yamldef.Parse("f.yaml", []byte(src), yamldef.Options{}); err == nil {
			valid[where] = src
		}
	}
	return valid
}

// TestSchemaAcceptsValidFixtures: every workflows file of the repository
// that the loader accepts, the schema accepts.
func TestSchemaAcceptsValidFixtures(t *testing.T) {
	t.Parallel()
	sch, _ := compileSchema(t)
	valid := validFixtures(t)
	// The files found: at least these, so that a change in how they are
	// found cannot make the test prove nothing.
	for _, want := range []string{"yamldef_test.go", "sagas_test.go", "waits_test.go", "docs/yaml.md", "doc.go", "e2e_test.go"} {
		if !slices.ContainsFunc(slices.Collect(maps.Keys(valid)), func(where string) bool { return strings.Contains(where, want) }) {
			t.Errorf("no valid workflows file found in %s", want)
		}
	}
	if len(valid) < 25 {
		t.Errorf("%d valid workflows files found, want at least 25", len(valid))
	}
	for _, where := range slices.Sorted(maps.Keys(valid)) {
		t.Logf("valid: %s", where)
		inst, err := instance(valid[where])
		if err != nil {
			t.Errorf("%s: the loader accepts it, but it does not convert to JSON: %v", where, err)
			continue
		}
		if err := sch.Validate(inst); err != nil {
			t.Errorf("%s: the loader accepts it, the schema does not: %v\n%s", where, err, valid[where])
		}
	}
}

// parserOnly are the loader's error cases that are not about the file's
// shape, which the schema accepts: templates and what they read, names
// that must be unique, groups that must be contiguous and used, hosts a
// URL may render, policies checked together with others' or the worker's,
// values a pattern cannot bound, and more than one YAML document.
var parserOnly = []string{
	// TestParseErrors.
	"duplicate step", // unique names
	"nameless breaker on a host-templated step",          // the host is a template
	"nameless workflow breaker on a host-templated step", // as above, inherited
	"nameless breaker on a host glued to a template",     // as above
	"nameless breaker on an IPv6 host",                   // the URL's host, not its shape
	"multiplier infinite",                                // JSON has no infinity
	"max below initial",                                  // two durations compared
	"initial above the defaults' max",                    // the worker's defaults
	"step initial above workflow max",                    // the workflow's and the step's
	"url template",                                       // templates
	"body template",                                      // templates
	"header template",                                    // templates
	"unknown function",                                   // templates
	"later step read",                                    // which steps a template reads
	"own output read",                                    // as above
	"host-templated url",                                 // hosts a URL may render
	"url path glued to the host",                         // as above
	"whole url templated",                                // as above
	"step turns the workflow's hosts off",                // as above
	"allowed_hosts numeric",                              // a name whose last label is a number
	"allowed_hosts listed twice",                         // the same host written two ways
	"poll until does not parse",                          // templates
	"poll until reads a later step",                      // which steps a template reads
	// TestParseSagaErrors.
	"group unused",                                                              // groups used by no step
	"group not contiguous",                                                      // the steps' order
	"group not contiguous, other group between",                                 // as above
	"compensation initial above the step's max",                                 // the step's and the compensation's
	"compensation template",                                                     // templates
	"compensation reads a later step",                                           // which steps a template reads
	"compensation host-templated",                                               // hosts a URL may render
	"compensation turns the step's hosts off",                                   // as above
	"step reads .compensation",                                                  // what a template reads
	"step body reads $.compensation",                                            // as above
	"sleep until reads .compensation",                                           // as above
	"compensation nameless breaker on a templated host",                         // the host is a template
	"compensation inherits the step's nameless breaker on a templated host",     // as above
	"compensation inherits the workflow's nameless breaker on a templated host", // as above
	// TestParseWaitErrors.
	`{name: s, type: sleep, with: {until: "{{.steps.nope.at}}"}}`, // which steps a template reads
	`{name: s, type: await, with: {signal: go, timeout: 9000h}}`,  // longer than 366 days
}

// TestSchemaRejectsStructuralErrors: the loader's error cases (those of
// TestParseErrors, TestParseSagaErrors and TestParseWaitErrors) that are
// about the file's shape, the schema refuses; those in parserOnly, it
// accepts.
func TestSchemaRejectsStructuralErrors(t *testing.T) {
	t.Parallel()
	sch, _ := compileSchema(t)
	type errorCase struct{ name, yaml string }
	var cases []errorCase
	for _, c := range append(parseErrorCases(), sagaErrorCases()...) {
		cases = append(cases, errorCase{c.name, c.yaml})
	}
	for _, c := range waitErrorCases() {
		cases = append(cases, errorCase{c.step, waitFile(c.step)})
	}
	names := map[string]bool{}
	notYAML := 0
	for _, c := range cases {
		if names[c.name] {
			t.Errorf("two cases are named %q", c.name)
		}
		names[c.name] = true
		if _, err := yamldef.Parse("f.yaml", []byte(c.yaml), yamldef.Options{}); err == nil {
			t.Errorf("%s: the loader accepts it", c.name)
			continue
		}
		inst, err := instance(c.yaml)
		if err != nil { // not YAML: refused before any schema
			notYAML++
			continue
		}
		err = sch.Validate(inst)
		switch only := slices.Contains(parserOnly, c.name); {
		case err == nil && !only:
			t.Errorf("%s: the schema accepts what the loader refuses; if the schema cannot see it, list it in parserOnly:\n%s", c.name, c.yaml)
		case err != nil && only:
			t.Errorf("%s: listed in parserOnly, but the schema refuses it: %v", c.name, err)
		case err != nil:
			if _, ok := errors.AsType[*jsonschema.ValidationError](err); !ok {
				t.Errorf("%s: %v (%T), not a validation error", c.name, err, err)
			}
		}
	}
	for _, name := range parserOnly {
		if !names[name] {
			t.Errorf("parserOnly lists %q, which is no case", name)
		}
	}
	t.Logf("%d cases: %d not YAML, %d parser-only, %d refused by the schema", len(cases), notYAML, len(parserOnly),
		len(cases)-notYAML-len(parserOnly))
	if notYAML > 10 || len(cases)-notYAML-len(parserOnly) < 100 {
		t.Errorf("%d cases, %d not YAML, %d parser-only: the schema was tested on too few", len(cases), notYAML, len(parserOnly))
	}
}
