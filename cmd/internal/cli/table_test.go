package cli

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/cairnhq/cairn/workflow"
)

// TestTableLaysOutAsTabwriter: off a terminal, a table writes what
// text/tabwriter wrote before it (the CLI's output must not change).
func TestTableLaysOutAsTabwriter(t *testing.T) {
	t.Parallel()
	for _, rows := range [][][]string{
		{{"ID", "WORKFLOW", "STATUS"}, {"01abc", "demo", "succeeded"}, {"01abd", "a much longer name", "failed"}},
		{{"name:", "value"}, {"needs attention:", "no"}, {"x:", ""}},
		{{"STEP", "LAST ERROR"}, {"fetch", "ünïcödé … error"}, {"é", "-"}},
		{{"only"}, {"column"}},
		{{"", "", "last"}, {"a", "", ""}},
	} {
		var want bytes.Buffer
		tw := tabwriter.NewWriter(&want, 0, 0, 2, ' ', 0)
		for _, r := range rows {
			fmt.Fprintln(tw, strings.Join(r, "\t"))
		}
		if err := tw.Flush(); err != nil {
			t.Fatal(err)
		}
		tb := newTable(layout{})
		for _, r := range rows {
			tb.add(r...)
		}
		var got bytes.Buffer
		if err := tb.write(&got); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("rows %q:\ngot\n%q\nwant (tabwriter)\n%q", rows, got.String(), want.String())
		}
	}
}

var sgr = regexp.MustCompile("\x1b\\[[0-9;]*m")

// TestTableFitsTheTerminal: on a terminal the free-text column is cut so
// that every line fits, keeping at least minFlexWidth runes of it; off a
// terminal only flexMax cuts it.
func TestTableFitsTheTerminal(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("connection refused ", 20)
	build := func(lay layout, flex, flexMax int) string {
		tb := newTable(lay)
		tb.head, tb.flex, tb.flexMax = true, flex, flexMax
		tb.add("STEP", "STATUS", "LAST ERROR", "AT")
		tb.add("fetch", "failed", long, "2026-03-01T12:00:00.000Z")
		tb.add("deliver", "pending", "-", "-")
		var b bytes.Buffer
		if err := tb.write(&b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	for _, width := range []int{80, 120, 200} {
		for _, flexMax := range []int{0, 60} {
			out := build(layout{width: width}, 2, flexMax)
			for l := range strings.SplitSeq(strings.TrimSuffix(out, "\n"), "\n") {
				if n := utf8.RuneCountInString(l); n > width-1 {
					t.Errorf("width %d: a line of %d runes:\n%s", width, n, out)
				}
			}
			if !strings.Contains(out, "…") {
				t.Errorf("width %d: the error is not cut:\n%s", width, out)
			}
		}
	}
	// A terminal too narrow for the other columns: the error keeps
	// minFlexWidth runes, and the line wraps.
	if out := build(layout{width: 40}, 2, 0); !strings.Contains(out, truncate(long, minFlexWidth)) {
		t.Errorf("narrow terminal:\n%s", out)
	}
	// Off a terminal: flexMax, or the whole text.
	if out := build(layout{}, 2, 60); !strings.Contains(out, truncate(long, 60)+"  ") {
		t.Errorf("not a terminal, flexMax 60:\n%s", out)
	}
	if out := build(layout{}, 2, 0); !strings.Contains(out, long) {
		t.Errorf("not a terminal, no flexMax:\n%s", out)
	}
	// Colour changes no column.
	plain, colored := build(layout{width: 100}, 2, 0), build(layout{width: 100, color: true}, 2, 0)
	if plain == colored || sgr.ReplaceAllString(colored, "") != plain {
		t.Errorf("colour changed the layout:\n%s\n%s", plain, colored)
	}
}

func TestWriteRunListColours(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	runs := []*workflow.Run{
		{ID: "01aaaaaaaaaaaaaaaaaaaaaaaa", Workflow: "demo", Status: workflow.StatusSucceeded, CreatedAt: now},
		{ID: "01aaaaaaaaaaaaaaaaaaaaaaab", Workflow: "demo", Status: workflow.StatusFailed, NeedsAttention: true, CreatedAt: now,
			Warning: strings.Repeat("a long warning ", 20)},
	}
	var plain, colored bytes.Buffer
	if err := writeRunList(&plain, layout{width: 120}, runs); err != nil {
		t.Fatal(err)
	}
	if err := writeRunList(&colored, layout{width: 120, color: true}, runs); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\x1b[1mID\x1b[0m", "\x1b[32msucceeded\x1b[0m", "\x1b[31mfailed\x1b[0m", "\x1b[31myes\x1b[0m"} {
		if !strings.Contains(colored.String(), want) {
			t.Errorf("no %q in\n%q", want, colored.String())
		}
	}
	if sgr.MatchString(plain.String()) || sgr.ReplaceAllString(colored.String(), "") != plain.String() {
		t.Errorf("plain:\n%s\ncoloured:\n%s", plain.String(), colored.String())
	}
	for l := range strings.SplitSeq(strings.TrimSuffix(plain.String(), "\n"), "\n") {
		if n := utf8.RuneCountInString(l); n > 119 {
			t.Errorf("a line of %d runes on a 120-column terminal: %q", n, l)
		}
	}
}
