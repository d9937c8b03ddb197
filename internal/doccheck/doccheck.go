package doccheck

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// File is a file's name, as problems name it, and its text.
type File struct {
	Name string
	Text string
}

// Problem is what is wrong at a line of a file, and the fix.
type Problem struct {
	File string
	Line int
	Msg  string
}

func (p *Problem) Error() string { return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg) }

// block is a fenced ```go block of a Markdown file.
type block struct {
	file   string
	fence  int    // the line of its opening fence
	marker string // the name on the line before the fence; "" for none
	lines  []string
}

// region is the code between "// snippet: NAME" and "// end snippet" in a
// test file.
type region struct {
	name  string
	file  string
	start int // the line of "// snippet: NAME"
	subs  []substitution
	lines []string
}

// substitution replaces an identifier of a region with the doc's text.
type substitution struct {
	ident, text string
}

var (
	markerRe = regexp.MustCompile(`^<!--\s*snippet:\s*(\S+)\s*-->$`)
	nameRe   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	identRe  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

const (
	regionStart = "// snippet:"
	regionEnd   = "// end snippet"
	// diffContext is how many equal lines a diff shows around the lines
	// that differ, and diffLines how many of those it shows of each side.
	diffContext = 2
	diffLines   = 4
)

// Load reads what Check checks: README.md and docs/*.md under root, and the
// *_test.go files of dir (a directory under root). Their names are relative
// to root, with slashes.
func Load(root, dir string) (docs, tests []File, err error) {
	mds, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, nil, err
	}
	gos, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, nil, err
	}
	read := func(paths []string) ([]File, error) {
		var fs []File
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, err
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return nil, err
			}
			fs = append(fs, File{Name: filepath.ToSlash(rel), Text: string(b)})
		}
		return fs, nil
	}
	if docs, err = read(append([]string{filepath.Join(root, "README.md")}, mds...)); err != nil {
		return nil, nil, err
	}
	if tests, err = read(gos); err != nil {
		return nil, nil, err
	}
	return docs, tests, nil
}

// Check checks the ```go blocks of docs (Markdown) against the regions of
// tests (Go test files) and returns what is wrong, in the order of the
// files given (each problem a *Problem).
func Check(docs, tests []File) []error {
	var errs []error
	var blocks []block
	for _, f := range docs {
		bs, es := parseMarkdown(f)
		blocks = append(blocks, bs...)
		errs = append(errs, es...)
	}
	regions := map[string]*region{}
	var order []*region
	for _, f := range tests {
		rs, es := parseRegions(f)
		errs = append(errs, es...)
		for _, r := range rs {
			if prev := regions[r.name]; prev != nil {
				errs = append(errs, &Problem{r.file, r.start, fmt.Sprintf(
					"a second region %q (the first is at %s:%d): rename one", r.name, prev.file, prev.start)})
				continue
			}
			regions[r.name] = r
			order = append(order, r)
		}
	}
	used := map[string]bool{}
	for _, b := range blocks {
		if b.marker == "" {
			errs = append(errs, &Problem{b.file, b.fence, fmt.Sprintf(
				"a ```go block without a marker: put <!-- snippet: NAME --> on the line before its fence, "+
					"and its code between %q and %q in a test of internal/doccheck that runs it",
				regionStart+" NAME", regionEnd)})
			continue
		}
		used[b.marker] = true
		r := regions[b.marker]
		if r == nil {
			errs = append(errs, &Problem{b.file, b.fence - 1, fmt.Sprintf(
				"snippet %q has no region: put its code between %q and %q in a test of internal/doccheck that runs it",
				b.marker, regionStart+" "+b.marker, regionEnd)})
			continue
		}
		if err := compare(b, r); err != nil {
			errs = append(errs, err)
		}
	}
	for _, r := range order {
		if !used[r.name] {
			errs = append(errs, &Problem{r.file, r.start, fmt.Sprintf(
				"region %q is in no doc: mark the ```go block it shows with <!-- snippet: %s -->, or remove the region",
				r.name, r.name)})
		}
	}
	return errs
}

// parseMarkdown returns the ```go blocks of f.
func parseMarkdown(f File) ([]block, []error) {
	var blocks []block
	var errs []error
	lines := splitLines(f.Text)
	for i := 0; i < len(lines); i++ {
		trimmed := strings.TrimLeft(lines[i], " ")
		if !strings.HasPrefix(trimmed, "```") {
			continue
		}
		indent := len(lines[i]) - len(trimmed)
		fence := trimmed[:len(trimmed)-len(strings.TrimLeft(trimmed, "`"))]
		info := strings.Fields(trimmed[len(fence):])
		isGo := len(info) > 0 && info[0] == "go"
		b := block{file: f.Name, fence: i + 1}
		if isGo && i > 0 {
			if m := markerRe.FindStringSubmatch(strings.TrimSpace(lines[i-1])); m != nil {
				b.marker = m[1]
				if !nameRe.MatchString(b.marker) {
					errs = append(errs, &Problem{f.Name, i, fmt.Sprintf(
						"snippet name %q: use letters, digits, '_', '.' and '-'", b.marker)})
				}
			}
		}
		closed := false
		for i++; i < len(lines); i++ {
			t := strings.TrimLeft(lines[i], " ")
			if strings.HasPrefix(t, fence) && strings.TrimRight(t, "` \t") == "" {
				closed = true
				break
			}
			// CommonMark: a fence's indentation is removed from its lines.
			line := lines[i]
			for n := 0; n < indent && strings.HasPrefix(line, " "); n++ {
				line = line[1:]
			}
			b.lines = append(b.lines, line)
		}
		if !closed {
			errs = append(errs, &Problem{f.Name, b.fence, "a fenced block that is never closed"})
			break
		}
		if isGo {
			blocks = append(blocks, b)
		}
	}
	return blocks, errs
}

// parseRegions returns the regions of f.
func parseRegions(f File) ([]*region, []error) {
	var regions []*region
	var errs []error
	var cur *region
	for i, line := range splitLines(f.Text) {
		t := strings.TrimSpace(line)
		switch {
		case t == regionEnd:
			if cur == nil {
				errs = append(errs, &Problem{f.Name, i + 1, fmt.Sprintf("%q without %q before it", regionEnd, regionStart+" NAME")})
				continue
			}
			regions = append(regions, cur)
			cur = nil
		case strings.HasPrefix(t, regionStart):
			r, err := parseStart(f.Name, i+1, strings.TrimSpace(t[len(regionStart):]))
			if err != nil {
				errs = append(errs, err)
			}
			if cur != nil {
				errs = append(errs, &Problem{f.Name, i + 1, fmt.Sprintf(
					"region %q starts inside region %q (line %d): end that one first with %q", r.name, cur.name, cur.start, regionEnd)})
			}
			cur = r
		case cur != nil:
			cur.lines = append(cur.lines, line)
		}
	}
	if cur != nil {
		errs = append(errs, &Problem{f.Name, cur.start, fmt.Sprintf("region %q never ends: add a line %q", cur.name, regionEnd)})
	}
	return regions, errs
}

// parseStart parses what follows "// snippet:": NAME, then optionally
// "(ident => text, ...)".
func parseStart(file string, line int, s string) (*region, error) {
	r := &region{file: file, start: line}
	name, rest, _ := strings.Cut(s, " ")
	r.name = name
	if !nameRe.MatchString(name) {
		return r, &Problem{file, line, fmt.Sprintf("region name %q: use letters, digits, '_', '.' and '-'", name)}
	}
	rest = strings.TrimSpace(rest)
	if rest == "" {
		return r, nil
	}
	inner, open := strings.CutPrefix(rest, "(")
	inner, closed := strings.CutSuffix(inner, ")")
	if !open || !closed {
		return r, &Problem{file, line, fmt.Sprintf(`after the region's name, substitutions in parentheses: (ident => text, ...), not %q`, rest)}
	}
	for sub := range strings.SplitSeq(inner, ",") {
		ident, text, ok := strings.Cut(sub, "=>")
		ident, text = strings.TrimSpace(ident), strings.TrimSpace(text)
		if !ok || !identRe.MatchString(ident) || text == "" {
			return r, &Problem{file, line, fmt.Sprintf(`substitution %q: write ident => text`, strings.TrimSpace(sub))}
		}
		r.subs = append(r.subs, substitution{ident, text})
	}
	return r, nil
}

// compare returns a Problem when the region's code, with its common
// indentation removed and its substitutions made, is not b's.
func compare(b block, r *region) error {
	got := dedent(r.lines)
	for _, s := range r.subs {
		n := 0
		for i := range got {
			var k int
			got[i], k = replaceWord(got[i], s.ident, s.text)
			n += k
		}
		if n == 0 {
			return &Problem{r.file, r.start, fmt.Sprintf("substitution %s => %s replaces nothing in region %q: remove it", s.ident, s.text, r.name)}
		}
	}
	i := 0
	for i < len(b.lines) && i < len(got) && b.lines[i] == got[i] {
		i++
	}
	if i == len(b.lines) && i == len(got) {
		return nil
	}
	var d strings.Builder
	fmt.Fprintf(&d, "snippet %q differs from its region: make them equal (the region is the code the test runs)\n", r.name)
	fmt.Fprintf(&d, "--- %s:%d (the doc)\n+++ %s:%d (region %q", b.file, b.fence+1, r.file, r.start+1, r.name)
	if len(r.subs) > 0 {
		d.WriteString(", substituted")
	}
	fmt.Fprintf(&d, ")\n@@ line %d of the block @@\n", i+1)
	for _, l := range b.lines[max(0, i-diffContext):i] {
		d.WriteString("  " + show(l) + "\n")
	}
	// The lines that differ end where the blocks' common ending starts.
	j := 0
	for j < len(b.lines)-i && j < len(got)-i && b.lines[len(b.lines)-1-j] == got[len(got)-1-j] {
		j++
	}
	for _, side := range []struct {
		mark  string
		lines []string
	}{{"-", b.lines[i : len(b.lines)-j]}, {"+", got[i : len(got)-j]}} {
		for _, l := range side.lines[:min(len(side.lines), diffLines)] {
			d.WriteString(side.mark + " " + show(l) + "\n")
		}
		if n := len(side.lines) - diffLines; n > 0 {
			fmt.Fprintf(&d, "%s (%d more)\n", side.mark, n)
		}
	}
	for _, l := range b.lines[len(b.lines)-j : min(len(b.lines), len(b.lines)-j+diffContext)] {
		d.WriteString("  " + show(l) + "\n")
	}
	return &Problem{b.file, b.fence + 1 + i, strings.TrimSuffix(d.String(), "\n")}
}

// show makes a line's tabs and trailing spaces visible in a diff.
func show(l string) string {
	trimmed := strings.TrimRight(l, " ")
	return strings.ReplaceAll(trimmed, "\t", "→   ") + strings.Repeat("·", len(l)-len(trimmed))
}

// dedent returns lines without the leading whitespace they all have
// (blank lines aside), and without blank lines at their start and end
// (gofmt puts one between a top-level declaration and "// end snippet").
func dedent(lines []string) []string {
	for len(lines) > 0 && strings.TrimSpace(lines[0]) == "" {
		lines = lines[1:]
	}
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	prefix := ""
	first := true
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		ws := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
		if first {
			prefix, first = ws, false
			continue
		}
		for !strings.HasPrefix(ws, prefix) {
			prefix = prefix[:len(prefix)-1]
		}
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		if strings.TrimSpace(l) == "" {
			out[i] = ""
			continue
		}
		out[i] = l[len(prefix):]
	}
	return out
}

// replaceWord replaces ident in s where it stands as a whole word (not
// beside a letter, digit or '_'), and says how many times it did.
func replaceWord(s, ident, text string) (string, int) {
	var out strings.Builder
	n := 0
	for {
		j := strings.Index(s, ident)
		if j < 0 {
			out.WriteString(s)
			return out.String(), n
		}
		end := j + len(ident)
		if (j > 0 && isWord(s[j-1])) || (end < len(s) && isWord(s[end])) {
			out.WriteString(s[:end])
			s = s[end:]
			continue
		}
		out.WriteString(s[:j] + text)
		s = s[end:]
		n++
	}
}

func isWord(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// splitLines splits text into lines, without their "\n" (or "\r\n").
func splitLines(text string) []string {
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	return lines
}

// FindRoot returns the directory of the go.mod that holds dir.
func FindRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("doccheck: no go.mod in " + dir + " or above")
		}
	}
}
