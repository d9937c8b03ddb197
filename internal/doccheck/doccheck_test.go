package doccheck

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// TestDocSnippets checks every ```go block of README.md and docs/*.md
// against its region in this package's tests, which run it.
func TestDocSnippets(t *testing.T) {
	t.Parallel()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := FindRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	docs, tests, err := Load(root, wd)
	if err != nil {
		t.Fatal(err)
	}
	blocks := 0
	for _, d := range docs {
		bs, _ := parseMarkdown(d)
		blocks += len(bs)
	}
	if blocks == 0 || len(tests) == 0 {
		t.Fatalf("found %d go blocks in %d docs and %d test files: is %s the module's root?", blocks, len(docs), len(tests), root)
	}
	for _, err := range Check(docs, tests) {
		t.Error(err)
	}
	t.Logf("%d go blocks in %d docs checked", blocks, len(docs))
}

// text joins lines into a file's text. (The tests spell region markers
// inside string literals, so that TestDocSnippets does not take them for
// regions.)
func text(lines ...string) string { return strings.Join(lines, "\n") + "\n" }

// TestCheck runs the checker on docs and regions in memory: each case lists
// the problems it must find, as the start of their messages, in order.
func TestCheck(t *testing.T) {
	t.Parallel()
	readme := func(lines ...string) []File { return []File{{"README.md", text(lines...)}} }
	tests := func(lines ...string) []File { return []File{{"x_test.go", text(lines...)}} }
	region := tests(
		"func TestX(t *testing.T) {",
		"\t// snippet: start",
		"\tif err := f(); err != nil {",
		"\t\treturn",
		"\t}",
		"",
		"\tg()",
		"\t// end snippet",
		"}",
	)
	sub := tests(
		`	// snippet: sub (redisAddr => "127.0.0.1:6379", two => 2)`,
		"	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})",
		"	redisAddrs, n := 1, two",
		"	// end snippet",
	)
	block := []string{
		"<!-- snippet: start -->",
		"```go",
		"if err := f(); err != nil {",
		"\treturn",
		"}",
		"",
		"g()",
		"```",
	}
	for _, c := range []struct {
		name  string
		docs  []File
		tests []File
		want  []string
	}{
		{
			name:  "equal",
			docs:  readme(append([]string{"# Title", ""}, block...)...),
			tests: region,
		},
		{
			name:  "a top-level region: blank lines around it",
			docs:  readme("<!-- snippet: top -->", "```go", "var x = 1", "", "func f() {}", "```"),
			tests: tests("// snippet: top", "", "var x = 1", "", "func f() {}", "", "// end snippet"),
		},
		{
			name: "two docs share a region, other blocks are not Go",
			docs: append(readme(block...), File{"docs/a.md", text(
				append(append([]string{"```sh", "echo", "```"}, block...), "```yaml", "a: 1", "```")...)}),
			tests: region,
		},
		{
			name:  "no marker",
			docs:  readme("text", "```go", "g()", "```"),
			tests: nil,
			want:  []string{"README.md:2: a ```go block without a marker: put <!-- snippet: NAME -->"},
		},
		{
			name:  "no region",
			docs:  readme("<!-- snippet: gone -->", "```go", "g()", "```"),
			want:  []string{`README.md:1: snippet "gone" has no region`},
			tests: tests("// snippet is a word here, not a region"),
		},
		{
			name:  "a changed line",
			docs:  readme("<!-- snippet: start -->", "```go", "if err := f(); err != nil {", "\treturn", "}", "", "h()", "```"),
			tests: region,
			want: []string{`README.md:7: snippet "start" differs from its region: make them equal` +
				" (the region is the code the test runs)\n" +
				"--- README.md:3 (the doc)\n" +
				"+++ x_test.go:3 (region \"start\")\n" +
				"@@ line 5 of the block @@\n" +
				"  }\n" +
				"  \n" +
				"- h()\n" +
				"+ g()"},
		},
		{
			name:  "spaces for a tab",
			docs:  readme("<!-- snippet: start -->", "```go", "if err := f(); err != nil {", "    return", "}", "", "g()", "```"),
			tests: region,
			want: []string{`README.md:4: snippet "start" differs from its region: make them equal` +
				" (the region is the code the test runs)\n" +
				"--- README.md:3 (the doc)\n" +
				"+++ x_test.go:3 (region \"start\")\n" +
				"@@ line 2 of the block @@\n" +
				"  if err := f(); err != nil {\n" +
				"-     return\n" +
				"+ →   return\n" +
				"  }\n" +
				"  "},
		},
		{
			name:  "the doc's block is shorter",
			docs:  readme("<!-- snippet: start -->", "```go", "if err := f(); err != nil {", "\treturn", "}", "```"),
			tests: region,
			want: []string{`README.md:6: snippet "start" differs from its region: make them equal` +
				" (the region is the code the test runs)\n" +
				"--- README.md:3 (the doc)\n" +
				"+++ x_test.go:3 (region \"start\")\n" +
				"@@ line 4 of the block @@\n" +
				"  →   return\n" +
				"  }\n" +
				"+ \n" +
				"+ g()"},
		},
		{
			name:  "many lines differ",
			docs:  readme("<!-- snippet: many -->", "```go", "b1()", "b2()", "b3()", "b4()", "b5()", "b6()", "```"),
			tests: tests("// snippet: many", "a1()", "a2()", "a3()", "a4()", "a5()", "a6()", "// end snippet"),
			want: []string{`README.md:3: snippet "many" differs from its region: make them equal` +
				" (the region is the code the test runs)\n" +
				"--- README.md:3 (the doc)\n" +
				"+++ x_test.go:2 (region \"many\")\n" +
				"@@ line 1 of the block @@\n" +
				"- b1()\n- b2()\n- b3()\n- b4()\n- (2 more)\n" +
				"+ a1()\n+ a2()\n+ a3()\n+ a4()\n+ (2 more)"},
		},
		{
			name:  "stale region",
			docs:  readme("no code"),
			tests: region,
			want:  []string{`x_test.go:2: region "start" is in no doc: mark the ` + "```go block it shows with <!-- snippet: start -->"},
		},
		{
			name: "substitution, whole words only",
			docs: readme("<!-- snippet: sub -->", "```go", `rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})`,
				"redisAddrs, n := 1, 2", "```"),
			tests: sub,
		},
		{
			name: "substituted, and still different",
			docs: readme("<!-- snippet: sub -->", "```go", `rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6380"})`,
				"redisAddrs, n := 1, 2", "```"),
			tests: sub,
			want: []string{`README.md:3: snippet "sub" differs from its region: make them equal` +
				" (the region is the code the test runs)\n" +
				"--- README.md:3 (the doc)\n" +
				"+++ x_test.go:2 (region \"sub\", substituted)\n" +
				"@@ line 1 of the block @@\n" +
				`- rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6380"})` + "\n" +
				`+ rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})` + "\n" +
				"  redisAddrs, n := 1, 2"},
		},
		{
			name:  "a substitution that replaces nothing",
			docs:  readme("<!-- snippet: sub -->", "```go", "g()", "```"),
			tests: tests("// snippet: sub (addr => x)", "g()", "// end snippet"),
			want:  []string{`x_test.go:1: substitution addr => x replaces nothing in region "sub"`},
		},
		{
			name:  "malformed substitution",
			docs:  readme("<!-- snippet: sub -->", "```go", "g()", "```"),
			tests: tests("// snippet: sub (addr = x)", "g()", "// end snippet"),
			want:  []string{`x_test.go:1: substitution "addr = x": write ident => text`},
		},
		{
			name:  "substitutions without parentheses",
			docs:  readme("<!-- snippet: sub -->", "```go", "g()", "```"),
			tests: tests("// snippet: sub addr => x", "g()", "// end snippet"),
			want:  []string{`x_test.go:1: after the region's name, substitutions in parentheses: (ident => text, ...), not "addr => x"`},
		},
		{
			name: "regions that do not end, nest or repeat",
			docs: readme("<!-- snippet: a -->", "```go", "a()", "```", "<!-- snippet: b -->", "```go", "b()", "```"),
			tests: append(tests("// snippet: a", "a()", "// end snippet", "// end snippet"),
				File{"y_test.go", text("// snippet: a", "a()", "// snippet: b", "b()", "// end snippet", "// snippet: c")}),
			want: []string{
				`x_test.go:4: "// end snippet" without "// snippet: NAME" before it`,
				`y_test.go:3: region "b" starts inside region "a" (line 1)`,
				`y_test.go:6: region "c" never ends`,
			},
		},
		{
			name: "a second region of a name",
			docs: readme("<!-- snippet: a -->", "```go", "a()", "```"),
			tests: append(tests("// snippet: a", "a()", "// end snippet"),
				File{"y_test.go", text("// snippet: a", "a()", "// end snippet")}),
			want: []string{`y_test.go:1: a second region "a" (the first is at x_test.go:1): rename one`},
		},
		{
			name: "a fence never closed",
			docs: readme("<!-- snippet: a -->", "```go", "a()"),
			want: []string{"README.md:2: a fenced block that is never closed"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			errs := Check(c.docs, c.tests)
			for i, err := range errs {
				if i >= len(c.want) || !strings.HasPrefix(err.Error(), c.want[i]) {
					t.Errorf("problem %d:\n%v", i+1, err)
				}
				if _, ok := errors.AsType[*Problem](err); !ok {
					t.Errorf("problem %d is a %T, not a *Problem", i+1, err)
				}
			}
			for _, w := range c.want[min(len(errs), len(c.want)):] {
				t.Errorf("missing problem: %s", w)
			}
		})
	}
}
