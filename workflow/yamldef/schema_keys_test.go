package yamldef

import (
	"encoding/json"
	"go/ast"
	goparser "go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSchemaKeys: each mapping of schema.json has the keys the loader
// allows, and no others (additionalProperties false), so that a key added
// to the loader is added to the schema. Every list of keys of the package
// (a package-level variable named ...Keys) is compared.
func TestSchemaKeys(t *testing.T) {
	t.Parallel()
	var doc map[string]any
	if err := json.Unmarshal(schemaJSON, &doc); err != nil {
		t.Fatal(err)
	}
	// The schema's mapping (a JSON pointer) of each list of keys.
	lists := []struct {
		name string
		keys []string
		ptr  string
	}{
		{"the file", []string{"workflows"}, ""}, // and x- keys: patternProperties
		{"workflowKeys", workflowKeys, "/$defs/workflow"},
		{"resiliencyKeys", resiliencyKeys, "/$defs/resiliency"},
		{"retryKeys", retryKeys, "/$defs/retry"},
		{"timeoutKeys", timeoutKeys, "/$defs/timeouts"},
		{"breakerKeys", breakerKeys, "/$defs/breaker"},
		{"checkpointKeys", checkpointKeys, "/$defs/checkpoint"},
		{"orderingKeys", orderingKeys, "/$defs/ordering"},
		{"stepKeys", stepKeys, "/$defs/step"},
		{"compensateKeys", compensateKeys, "/$defs/compensation"},
		{"a compensation's timeouts", []string{"step"}, "/$defs/compensation/properties/timeouts"},
		{"groupKeys", groupKeys, "/$defs/groups/additionalProperties"},
		{"httpKeys", httpKeys, "/$defs/httpWith"},
		{"pollKeys", pollKeys, "/$defs/httpWith/properties/poll"},
		{"awaitKeys", awaitKeys, "/$defs/awaitWith"},
		{"sleepKeys", sleepKeys, "/$defs/sleepWith"},
	}
	for _, l := range lists {
		m := doc
		for _, part := range strings.Split(l.ptr, "/")[1:] {
			m, _ = m[part].(map[string]any)
		}
		if m == nil {
			t.Errorf("%s: no mapping at %q in schema.json", l.name, l.ptr)
			continue
		}
		if m["additionalProperties"] != false {
			t.Errorf("%s (%s): additionalProperties is not false: the schema lets unknown keys pass", l.name, l.ptr)
		}
		props, _ := m["properties"].(map[string]any)
		got := make([]string, 0, len(props))
		for k := range props {
			got = append(got, k)
		}
		slices.Sort(got)
		if want := slices.Sorted(slices.Values(l.keys)); !slices.Equal(got, want) {
			t.Errorf("%s (%s): the schema has the keys %q, the loader %q", l.name, l.ptr, got, want)
		}
	}

	// Every list of keys of the package is compared above.
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := goparser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, spec := range g.Specs {
				vs, ok := spec.(*ast.ValueSpec)
				if !ok {
					continue
				}
				for _, id := range vs.Names {
					if strings.HasSuffix(id.Name, "Keys") && !slices.ContainsFunc(lists, func(l struct {
						name string
						keys []string
						ptr  string
					}) bool {
						return l.name == id.Name
					}) {
						t.Errorf("%s: the keys %s are not compared with the schema's", fset.Position(id.Pos()), id.Name)
					}
				}
			}
		}
	}
}
