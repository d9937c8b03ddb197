package doccheck

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// TestDocLinks checks every relative link of every Markdown file of the
// repository: [text](path), [text](path#anchor), [text](#anchor) and
// reference definitions ([name]: path). The file or folder a link names
// must exist and, in a Markdown file, so must the heading its anchor
// names, by GitHub's rule (see anchor). Links with a scheme (https:,
// mailto:), autolinks (<https://...>) included, are checked for syntax
// only, never fetched (checkExternal); links inside code (fenced blocks,
// `spans`) are not links. node_modules, testdata and .git are not walked.
func TestDocLinks(t *testing.T) {
	t.Parallel()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := FindRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	files, err := markdownFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]map[string]bool{} // slash path from root → its anchors
	texts := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		texts[f] = string(b)
		anchors[f] = headingAnchors(string(b))
	}
	links := 0
	for _, f := range files {
		for _, l := range markdownLinks(texts[f]) {
			links++
			if msg := checkLink(root, f, l.target, anchors); msg != "" {
				t.Errorf("%s:%d: [%s](%s): %s", f, l.line, l.text, l.target, msg)
			}
		}
	}
	if len(files) < 10 || links < 50 {
		t.Fatalf("found %d links in %d Markdown files: is %s the module's root?", links, len(files), root)
	}
	t.Logf("%d links in %d Markdown files checked", links, len(files))
}

// markdownFiles lists the repository's *.md files, as slash paths from
// root, leaving out node_modules, testdata and .git.
func markdownFiles(root string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (name == "node_modules" || name == "testdata" || name == ".git") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".md") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	return files, err
}

// checkLink says what is wrong with a link of file from (a slash path from
// root) to target, or "" when nothing is.
func checkLink(root, from, target string, anchors map[string]map[string]bool) string {
	if hasScheme(target) {
		return checkExternal(target)
	}
	if target == "" || strings.HasPrefix(target, "//") {
		return ""
	}
	p, frag, _ := strings.Cut(target, "#")
	p, err := url.PathUnescape(p)
	if err != nil {
		return fmt.Sprintf("a path that does not unescape: %v", err)
	}
	dest := from
	if p != "" {
		if abs, ok := strings.CutPrefix(p, "/"); ok {
			dest = path.Clean(abs)
		} else {
			dest = path.Join(path.Dir(from), p)
		}
		if dest == ".." || strings.HasPrefix(dest, "../") {
			return "a path outside the repository"
		}
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(dest))); err != nil {
			return "no such file or folder"
		}
	}
	if frag == "" || !strings.HasSuffix(dest, ".md") {
		return ""
	}
	as, ok := anchors[dest]
	if !ok {
		return "" // a Markdown file the walk leaves out (testdata)
	}
	if !as[strings.ToLower(frag)] {
		return fmt.Sprintf("no heading of %s has the anchor #%s", dest, frag)
	}
	return ""
}

var schemeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

// checkExternal checks the syntax of a link with a scheme, without
// fetching it: an http(s) URL must parse and name a host (a port, when
// given, a number); mailto: must name an address. Other schemes pass.
func checkExternal(target string) string {
	scheme, _, _ := strings.Cut(target, ":")
	switch strings.ToLower(scheme) {
	case "http", "https":
		u, err := url.Parse(target)
		if err != nil {
			return fmt.Sprintf("not a URL: %v", errors.Unwrap(err))
		}
		if u.Host == "" || u.Hostname() == "" || !strings.HasPrefix(target[len(scheme):], "://") {
			return "an http(s) URL without a host: want scheme://host/path"
		}
		if p := u.Port(); p != "" {
			if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				return fmt.Sprintf("port %q is not a number from 1 to 65535", p)
			}
		}
	case "mailto":
		if !strings.Contains(target, "@") {
			return "a mailto: link without an address"
		}
	}
	return ""
}

func hasScheme(s string) bool { return schemeRE.MatchString(s) }

type mdLink struct {
	line         int
	text, target string
}

var (
	// inlineLinkRE matches [text](target) and [text](target "title"), images
	// too; text may hold one level of brackets ([`x[0]`](y)).
	inlineLinkRE = regexp.MustCompile(`\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*<?([^()\s<>]*(?:\([^()\s]*\)[^()\s<>]*)*)>?(?:\s+"[^"]*")?\s*\)`)
	// refDefRE matches a reference definition, [name]: target.
	refDefRE = regexp.MustCompile(`^ {0,3}\[([^\]]+)\]:\s*<?(\S+?)>?(?:\s+.*)?$`)
	// autolinkRE matches an autolink, <https://example.com/>.
	autolinkRE = regexp.MustCompile(`<([A-Za-z][A-Za-z0-9+.-]{1,31}:[^<>\s]*)>`)
)

// markdownLinks returns the links of a Markdown text, outside code.
func markdownLinks(text string) []mdLink {
	var links []mdLink
	fence := ""
	for i, line := range strings.Split(text, "\n") {
		if f := fenceOf(line); f != "" {
			switch {
			case fence == "":
				fence = f
			case strings.HasPrefix(f, fence) && strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(line), string(fence[0]))) == "":
				fence = ""
			}
			continue
		}
		if fence != "" {
			continue
		}
		if m := refDefRE.FindStringSubmatch(line); m != nil {
			links = append(links, mdLink{i + 1, m[1], m[2]})
			continue
		}
		// Code spans are blanked to find the links, which are read from
		// the line as written (a link's text may be code).
		blanked := blankCodeSpans(line)
		for _, m := range inlineLinkRE.FindAllStringSubmatchIndex(blanked, -1) {
			links = append(links, mdLink{i + 1, line[m[2]:m[3]], line[m[4]:m[5]]})
		}
		for _, m := range autolinkRE.FindAllStringSubmatchIndex(blanked, -1) {
			links = append(links, mdLink{i + 1, line[m[2]:m[3]], line[m[2]:m[3]]})
		}
	}
	return links
}

// blankCodeSpans replaces each code span of a line (`x`, “x“) by
// spaces; a run of backticks that nothing closes is left as it is.
func blankCodeSpans(line string) string {
	b := []byte(line)
	for i := 0; i < len(b); {
		if b[i] != '`' {
			i++
			continue
		}
		n := 0
		for i+n < len(b) && b[i+n] == '`' {
			n++
		}
		end := -1
		for j := i + n; j < len(b); {
			if b[j] != '`' {
				j++
				continue
			}
			m := 0
			for j+m < len(b) && b[j+m] == '`' {
				m++
			}
			if m == n {
				end = j + m
				break
			}
			j += m
		}
		if end < 0 {
			i += n
			continue
		}
		for k := i; k < end; k++ {
			b[k] = ' '
		}
		i = end
	}
	return string(b)
}

// fenceOf returns the fence a line opens or closes (``` or ~~~, or
// longer), or "".
func fenceOf(line string) string {
	s := strings.TrimLeft(line, " ")
	if len(line)-len(s) > 3 {
		return ""
	}
	for _, c := range []string{"`", "~"} {
		n := len(s) - len(strings.TrimLeft(s, c))
		if n >= 3 {
			return strings.Repeat(c, n)
		}
	}
	return ""
}

// headingAnchors returns the anchors GitHub gives the ATX headings of a
// Markdown text (outside code fences), a repeated one numbered as GitHub
// numbers it (x, x-1, x-2).
func headingAnchors(text string) map[string]bool {
	as := map[string]bool{}
	seen := map[string]int{}
	fence := ""
	for line := range strings.SplitSeq(text, "\n") {
		if f := fenceOf(line); f != "" {
			switch {
			case fence == "":
				fence = f
			case strings.HasPrefix(f, fence):
				fence = ""
			}
			continue
		}
		if fence != "" {
			continue
		}
		h, ok := headingText(line)
		if !ok {
			continue
		}
		a := anchor(h)
		if n := seen[a]; n > 0 {
			as[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			as[a] = true
		}
		seen[a]++
	}
	return as
}

// headingText returns the text of an ATX heading line (# Title).
func headingText(line string) (string, bool) {
	s := strings.TrimLeft(line, " ")
	if len(line)-len(s) > 3 {
		return "", false
	}
	n := len(s) - len(strings.TrimLeft(s, "#"))
	if n == 0 || n > 6 {
		return "", false
	}
	rest := s[n:]
	if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
		return "", false
	}
	rest = strings.TrimSpace(rest)
	// A closing sequence of #s, after a space, is not part of the text.
	if t := strings.TrimRight(rest, "#"); t != rest && (t == "" || strings.HasSuffix(t, " ")) {
		rest = strings.TrimSpace(t)
	}
	return rest, true
}

var linkInTextRE = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)

// anchor is GitHub's anchor of a heading's text: the rendered text (a
// link's text stands for the link), lower-cased, with every character but
// letters, digits, spaces, - and _ dropped, and each space turned into -.
func anchor(heading string) string {
	heading = linkInTextRE.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestAnchor holds anchor and the link finder to GitHub's rules on cases
// this repository's documents use.
func TestAnchor(t *testing.T) {
	t.Parallel()
	for heading, want := range map[string]string{
		"Ordering keys and max_running":                 "ordering-keys-and-max_running",
		"Compensations and step groups (sagas)":         "compensations-and-step-groups-sagas",
		"Task IDs and the asynq contract (`tasks/`)":    "task-ids-and-the-asynq-contract-tasks",
		"`CAIRN_REDIS_MIN_REPLICAS`: writes that wait":  "cairn_redis_min_replicas-writes-that-wait",
		"Loops: snooze and goto":                        "loops-snooze-and-goto",
		"Redis: one server, Sentinel or a Cluster":      "redis-one-server-sentinel-or-a-cluster",
		"The [Lua](retrystate/lua/README.md) scripts":   "the-lua-scripts",
		"What survives what":                            "what-survives-what",
		"Failover: what asynchronous replication can …": "failover-what-asynchronous-replication-can-",
	} {
		if got := anchor(heading); got != want {
			t.Errorf("anchor(%q) = %q, want %q", heading, got, want)
		}
	}
	as := headingAnchors(text("# A", "```", "# B", "```", "## A", "### C ##", "#D"))
	for _, a := range []string{"a", "a-1", "c"} {
		if !as[a] {
			t.Errorf("headingAnchors: no %q in %v", a, as)
		}
	}
	if as["b"] || as["d"] || len(as) != 3 {
		t.Errorf("headingAnchors: %v, want a, a-1 and c", as)
	}
	links := markdownLinks(text(
		"See [the map](docs/architecture.md#the-floors) and [`x[0]`](y.md).",
		"Not `[code](z.md)`, nor:",
		"```",
		"[fenced](f.md)",
		"```",
		"[ref]: docs/redis.md#failover",
		"![img](a.png \"title\") [web](https://example.com)",
		"Open <http://127.0.0.1:8080/>, not `<http://x/>` nor <br>.",
	))
	var got []string
	for _, l := range links {
		got = append(got, fmt.Sprintf("%d:%s", l.line, l.target))
	}
	want := "1:docs/architecture.md#the-floors 1:y.md 6:docs/redis.md#failover 7:a.png 7:https://example.com 8:http://127.0.0.1:8080/"
	if strings.Join(got, " ") != want {
		t.Errorf("markdownLinks = %v, want %s", got, want)
	}
}

// TestCheckLink holds checkLink to what it must refuse and accept, in a
// repository of two files made for it.
func TestCheckLink(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"README.md":     text("# Cairn", "## Try it"),
		"docs/redis.md": text("# Redis", "## Failover: what it loses"),
	}
	anchors := map[string]map[string]bool{}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(name)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		anchors[name] = headingAnchors(body)
	}
	for _, c := range []struct {
		from, target string
		ok           bool
	}{
		{"README.md", "docs/redis.md", true},
		{"README.md", "docs/redis.md#failover-what-it-loses", true},
		{"README.md", "docs/redis.md#Failover-What-It-Loses", true},
		{"README.md", "#try-it", true},
		{"README.md", "docs/", true},
		{"README.md", "https://example.com/missing.md", true},
		{"docs/redis.md", "../README.md#cairn", true},
		{"docs/redis.md", "/README.md#try-it", true},
		{"README.md", "docs/missing.md", false},
		{"README.md", "docs/redis.md#failover", false},
		{"README.md", "#missing", false},
		{"docs/redis.md", "README.md", false},
		{"docs/redis.md", "../../outside.md", false},
		{"README.md", "http://127.0.0.1:8080/", true},
		{"README.md", "HTTPS://example.com/a?b=c#d", true},
		{"README.md", "mailto:ops@example.com", true},
		{"README.md", "https://", false},
		{"README.md", "https:example.com", false},
		{"README.md", "https:///path", false},
		{"README.md", "https://example.com:99999/", false},
		{"README.md", "https://example.com:port/", false},
		{"README.md", "http://[::1/", false},
		{"README.md", "mailto:", false},
	} {
		msg := checkLink(root, c.from, c.target, anchors)
		if (msg == "") != c.ok {
			t.Errorf("checkLink(%s, %s) = %q, want ok %v", c.from, c.target, msg, c.ok)
		}
	}
}

// repoURLRE matches a URL of a file of this repository on GitHub, in a
// link or in code (a YAML file's `$schema=` comment): its raw form
// (raw.githubusercontent.com/cairnhq/cairn/REF/PATH) or its page
// (github.com/cairnhq/cairn/blob/REF/PATH, or tree/ for a folder).
var repoURLRE = regexp.MustCompile(`https://(?:raw\.githubusercontent\.com/cairnhq/cairn/[^/\s]+|github\.com/cairnhq/cairn/(?:blob|tree)/[^/\s]+)/([^\s)>"'` + "`" + `#?]+)`)

// TestRepositoryURLs checks that every URL of a file of this repository on
// GitHub, in the Markdown files and the Go, JSON and YAML files, code
// blocks and comments included, names a file or folder that exists here:
// the page of the branch it names is what the file becomes once pushed.
// The network is not used.
func TestRepositoryURLs(t *testing.T) {
	t.Parallel()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := FindRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	if mod, err := os.ReadFile(filepath.Join(root, "go.mod")); err != nil || !strings.HasPrefix(string(mod), "module github.com/cairnhq/cairn\n") {
		t.Fatalf("%s/go.mod is not module github.com/cairnhq/cairn (%v): repoURLRE names that repository", root, err)
	}
	n := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (name == "node_modules" || name == "testdata" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(name) {
		case ".md", ".go", ".json", ".yml", ".yaml":
		default:
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range repoURLRE.FindAllStringSubmatch(line, -1) {
				n++
				target := strings.TrimRight(m[1], ".,;:")
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(target))); err != nil {
					t.Errorf("%s:%d: %s: no file or folder %s in the repository", filepath.ToSlash(rel), i+1, m[0], target)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no URL of this repository found: docs/yaml.md has one (the schema's); is repoURLRE broken?")
	}
	t.Logf("%d URLs of files of this repository checked", n)
}
