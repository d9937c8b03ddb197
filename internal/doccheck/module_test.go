package doccheck

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// readmeExample is the marker of the README's Go example, the one a new
// user copies into a service ("Use it from Go").
const readmeExample = "readme-signup"

// TestReadmeExampleInOwnModule builds the README's Go example as a user
// would: in a module of its own, outside the repository, that adds Cairn
// with the documented `go get` line (go mod edit -replace to this checkout
// first; the line's version query is left out), then go mod tidy with
// GOFLAGS=-mod=mod and the environment's GOPROXY, and checks that go build
// and go vet accept it. The example is the README's block as written,
// extracted from README.md, not a copy: a change to it that an outside
// module cannot build (an internal package, a name the public API lacks,
// a requirement go mod tidy cannot resolve) fails here.
//
// The block is a fragment, not a program: it leaves ctx, the accounts
// service and sendWelcome to the reader. The test wraps it, unchanged, in
// a func main that declares ctx, next to a sendWelcome and an accounts
// package of the module's own, and imports what it names. It needs a
// Redis to run, so it is built, not run (TestReadmeExample runs it).
//
// The repository's go.sum is copied into the module, so that go mod tidy
// needs no checksum database; the module cache must hold Cairn's
// requirements (go mod download in the repository fetches them), or the
// environment's GOPROXY must serve them.
func TestReadmeExampleInOwnModule(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds a module of its own with the go command (about 30s)")
	}
	t.Parallel()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("the go command is not on PATH: install Go 1.26 (https://go.dev/doc/install) and put its bin directory on PATH")
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := FindRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	code, err := exampleBlock(File{Name: "README.md", Text: string(readme)}, readmeExample)
	if err != nil {
		t.Fatal(err)
	}
	main, err := exampleProgram(code)
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("main.go", main)
	write("accounts/accounts.go", accountsPackage)
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	write("go.sum", string(sum))

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := moduleEnv(os.Environ(), dir)
	try := func(extraEnv []string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, goCmd, args...)
		cmd.Dir = dir
		cmd.Env = append(slices.Clip(env), extraEnv...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	fail := func(args []string, err error, out string) {
		t.Helper()
		t.Fatalf("in a module of its own (%s), go %s: %v\n%s\nmain.go, the README's %q block in a func main:\n%s",
			dir, strings.Join(args, " "), err, out, readmeExample, numbered(main))
	}
	run := func(extraEnv []string, args ...string) {
		t.Helper()
		if out, err := try(extraEnv, args...); err != nil {
			fail(args, err, out)
		}
	}
	getLine, err := documentedGoGet(root)
	if err != nil {
		t.Fatal(err)
	}
	run(nil, "mod", "init", "example.com/signup")
	run(nil, "mod", "edit", "-replace", "github.com/cairnhq/cairn="+root)
	// The documented line, without its version: a query (@main, @v1.2.0)
	// needs the network, and the replacement stands for it. Without a
	// version, go get still asks the proxy for Cairn's versions, and a
	// proxy may answer an error (403) rather than "not found" for a module
	// it does not serve; with GOPROXY=off it takes the replacement, and
	// reads Cairn's requirements from the module cache (when they are not
	// all there, go get is tried again with the environment's GOPROXY).
	// go mod tidy then gets what the cache lacks from that GOPROXY.
	t.Logf("%s: go get %s%s", getLine.where, getLine.path, getLine.version)
	if offOut, err := try([]string{"GOPROXY=off"}, "get", getLine.path); err != nil {
		if out, err := try(nil, "get", getLine.path); err != nil {
			fail([]string{"get", getLine.path}, err, "with GOPROXY=off:\n"+offOut+"with the environment's GOPROXY:\n"+out)
		}
	}
	run(nil, "mod", "tidy")
	run(nil, "build", "-o", filepath.Join(dir, "signup"), ".")
	run(nil, "vet", "./...")

	// What tidy wrote: a requirement of Cairn, replaced by this checkout.
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^\s*(require\s+)?github\.com/cairnhq/cairn v`).Match(mod) ||
		!strings.Contains(string(mod), "replace github.com/cairnhq/cairn => "+root) {
		t.Errorf("go.mod after go mod tidy does not require Cairn, replaced by %s:\n%s", root, mod)
	}
	if fi, err := os.Stat(filepath.Join(dir, "signup")); err != nil || fi.Size() == 0 {
		t.Errorf("go build wrote no binary: %v", err)
	}
}

// goGetRE matches a documented `go get` of Cairn: its package or module
// path, and its version query.
var goGetRE = regexp.MustCompile("go get (github\\.com/cairnhq/[^\\s`@]+)(@[^\\s`]+)?")

// goGetLine is a documented `go get` of Cairn, and where it is.
type goGetLine struct {
	where, path, version string
}

// documentedGoGet returns the first `go get` of Cairn that README.md,
// docs/*.md and CHANGELOG.md document, in that order; it fails when none
// does, or when one names another module than go.mod's.
func documentedGoGet(root string) (goGetLine, error) {
	mds, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return goGetLine{}, err
	}
	files := append(append([]string{filepath.Join(root, "README.md")}, mds...), filepath.Join(root, "CHANGELOG.md"))
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return goGetLine{}, err
	}
	module := strings.TrimSpace(strings.TrimPrefix(strings.SplitN(string(mod), "\n", 2)[0], "module"))
	var found []goGetLine
	for _, p := range files {
		b, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return goGetLine{}, err
		}
		rel, _ := filepath.Rel(root, p)
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range goGetRE.FindAllStringSubmatch(line, -1) {
				g := goGetLine{fmt.Sprintf("%s:%d", filepath.ToSlash(rel), i+1), m[1], m[2]}
				if g.path != module && !strings.HasPrefix(g.path, module+"/") {
					return goGetLine{}, fmt.Errorf("%s: go get %s: not module %s (go.mod) nor a package of it", g.where, g.path, module)
				}
				found = append(found, g)
			}
		}
	}
	if len(found) == 0 {
		return goGetLine{}, fmt.Errorf("no `go get %s...` line in README.md, docs/*.md or CHANGELOG.md: document how a module adds Cairn", module)
	}
	return found[0], nil
}

// exampleBlock returns the lines of the ```go block of f marked name.
func exampleBlock(f File, name string) ([]string, error) {
	blocks, errs := parseMarkdown(f)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	i := slices.IndexFunc(blocks, func(b block) bool { return b.marker == name })
	if i < 0 {
		return nil, fmt.Errorf("%s: no ```go block marked <!-- snippet: %s -->: the README's Go example moved or was renamed; update readmeExample", f.Name, name)
	}
	return blocks[i].lines, nil
}

// exampleImports are the packages the example may name, by the name it
// calls them: the program imports those the block selects from (name.X);
// context and workflow always, for the wrapper's own code.
var exampleImports = []struct{ name, path string }{
	{"context", "context"},
	{"errors", "errors"},
	{"fmt", "fmt"},
	{"log", "log"},
	{"time", "time"},
	{"redis", "github.com/redis/go-redis/v9"},
	{"asynq", "github.com/hibiken/asynq"},
	{"workflow", "github.com/cairnhq/cairn/workflow"},
	{"accounts", "example.com/signup/accounts"},
}

// exampleProgram wraps the example's lines, unchanged, in package main's
// func main, with ctx declared and the imports it names. The run and err
// the example declares are used, so that the compiler does not refuse the
// program for them.
func exampleProgram(lines []string) (string, error) {
	var body strings.Builder
	for _, l := range lines {
		if l != "" {
			body.WriteString("\t" + l)
		}
		body.WriteString("\n")
	}
	mainFunc := "func main() {\n\tctx := context.Background()\n\n" + body.String() + "\t_, _ = run, err\n}\n"
	// The names the block selects from, found by parsing it (a word
	// followed by a dot in a comment is not one).
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", "package main\n\n"+mainFunc, parser.SkipObjectResolution)
	if err != nil {
		return "", fmt.Errorf("the README's example does not parse as the body of a func: %w", err)
	}
	selected := map[string]bool{"context": true, "workflow": true}
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok {
				selected[id.Name] = true
			}
		}
		return true
	})
	var b strings.Builder
	b.WriteString("// Command signup is the README's Go example, in a module of its own.\npackage main\n\nimport (\n")
	for _, imp := range exampleImports {
		if selected[imp.name] {
			fmt.Fprintf(&b, "\t%q\n", imp.path)
		}
	}
	b.WriteString(")\n\n" + sendWelcomeFunc + "\n" + mainFunc)
	return b.String(), nil
}

// sendWelcomeFunc is the step function the example names and leaves to
// the reader.
const sendWelcomeFunc = `// sendWelcome is the example's second step: it would send the email.
func sendWelcome(ctx context.Context, sc *workflow.StepContext) (any, error) {
	return nil, ctx.Err()
}
`

// accountsPackage is the accounts service the example calls.
const accountsPackage = `// Package accounts is the accounts service the README's example calls.
package accounts

import (
	"context"
	"errors"
)

// ErrEmailTaken is Create's error for an email that has an account.
var ErrEmailTaken = errors.New("accounts: email taken")

// Create creates an account, once per idempotency key.
func Create(ctx context.Context, idempotencyKey string) (string, error) {
	return "acct-" + idempotencyKey, ctx.Err()
}
`

// moduleEnv is the environment of the go commands of the test's module:
// the caller's, with GOFLAGS=-mod=mod (tidy and build may update go.mod),
// no workspace, and no toolchain switch. GOPROXY, GOMODCACHE and GOCACHE
// are the caller's, so a warm module cache serves the requirements.
func moduleEnv(environ []string, dir string) []string {
	var env []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "GOFLAGS", "GOWORK", "GOTOOLCHAIN", "GO111MODULE", "PWD":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "GOFLAGS=-mod=mod", "GOWORK=off", "GOTOOLCHAIN=local", "GO111MODULE=on", "PWD="+dir)
}

// numbered returns text with line numbers, as the compiler's errors count
// them.
func numbered(text string) string {
	var b strings.Builder
	for i, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		fmt.Fprintf(&b, "%4d  %s\n", i+1, l)
	}
	return b.String()
}

// TestDocumentedGoGet holds documentedGoGet to what it must find and
// refuse, in repositories made for it.
func TestDocumentedGoGet(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		readme, changelog, want string // want: "where path version", or "" for an error
	}{
		{"Add it: `go get github.com/cairnhq/cairn@main`.\n", "", "README.md:1 github.com/cairnhq/cairn @main"},
		{"# T\n\n```sh\ngo get github.com/cairnhq/cairn/workflow\n```\n", "go get github.com/cairnhq/cairn@v1", "README.md:4 github.com/cairnhq/cairn/workflow "},
		{"no line here\n", "`go get github.com/cairnhq/cairn@main`", "CHANGELOG.md:1 github.com/cairnhq/cairn @main"},
		{"`go get github.com/cairnhq/cairnx`\n", "", ""},
		{"no line here\n", "", ""},
	} {
		root := t.TempDir()
		for name, text := range map[string]string{"go.mod": "module github.com/cairnhq/cairn\n\ngo 1.26.0\n", "README.md": c.readme, "CHANGELOG.md": c.changelog} {
			if err := os.WriteFile(filepath.Join(root, name), []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		g, err := documentedGoGet(root)
		if c.want == "" {
			if err == nil {
				t.Errorf("README %q: %+v, want an error", c.readme, g)
			}
			continue
		}
		if got := g.where + " " + g.path + " " + g.version; err != nil || got != c.want {
			t.Errorf("README %q: %q, %v; want %q", c.readme, got, err, c.want)
		}
	}
}
