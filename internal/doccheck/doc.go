// Package doccheck checks the documentation against the code: every Go
// snippet of README.md and docs/*.md is code that compiles and runs in a
// test of this package.
//
// A fenced ```go block of a Markdown file is preceded, on the line right
// before its fence, by an HTML comment naming it (invisible on GitHub):
//
//	<!-- snippet: readme-signup -->
//	```go
//	def := workflow.Definition{
//	...
//
// and the package's tests (*_test.go) hold a region of that name, between
// the lines
//
//	// snippet: readme-signup
//	// end snippet
//
// inside a test or an example that runs the code and checks what it did.
// The region's lines, with their common leading indentation and the blank
// lines at its start and end removed, must equal the block's lines exactly
// (the blocks indent with tabs, as gofmt does). A block without a marker, a
// marker without a region, a block that differs from its region and a
// region that no block names all fail TestDocSnippets, with FILE:LINE and
// the fix. Two blocks may name one region.
//
// A region whose code cannot be the block's as written (it runs against a
// test's own redis-server, where the block shows a copyable address)
// declares substitutions on its start line:
//
//	// snippet: readme-signup (redisAddr => "127.0.0.1:6379", other => text)
//
// Before the comparison, each identifier named is replaced, wherever it
// stands as a whole word in the region (strings and comments included), by
// the text after its "=>" (which holds no comma). A substitution that
// replaces nothing is an error.
//
// The links of every Markdown file of the repository are checked too
// (links_test.go), without the network: TestDocLinks resolves each
// relative link to a file or folder that exists and each #anchor to a
// heading by GitHub's rules, and checks the syntax of http(s) and mailto
// links; TestRepositoryURLs checks that each URL of a file of this
// repository on GitHub (raw.githubusercontent.com/cairnhq/cairn/...,
// github.com/cairnhq/cairn/blob/...), code blocks included, names a file
// that exists.
package doccheck
