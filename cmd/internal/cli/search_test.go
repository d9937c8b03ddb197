package cli_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/internal/demo"
	"github.com/cairnhq/cairn/workflow"
)

// TestListSearch: list's --id-prefix, --input, --since, --until and
// --max-scan, alone and combined; --json prints the runs as before; a
// bound that ends a page says so on stderr with the cursor that goes on.
func TestListSearch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker(workflow.Policy{})
	start := func(input string) string {
		t.Helper()
		run, err := e.client.Start(context.Background(), demo.Name, json.RawMessage(input), nil)
		if err != nil {
			t.Fatal(err)
		}
		return run.ID
	}
	r1 := start(`{"customer":{"id":1},"email":"a@x.io"}`)
	r2 := start(`{"customer":{"id":2}}`)
	r3 := start(`{"customer":{"id":1},"vip":true}`)
	ids := func(args ...string) []string {
		t.Helper()
		r := e.run(append([]string{"list", "--json"}, args...)...)
		mustSucceed(t, r)
		var runs []workflow.Run
		decode(t, r.stdout, &runs)
		var out []string
		for _, run := range runs {
			out = append(out, run.ID)
		}
		return out
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--input", "input.customer.id=1"}, []string{r3, r1}},
		{[]string{"--input", "input.customer.id=1", "--input", "input.vip=true"}, []string{r3}},
		{[]string{"--input", `input.email="a@x.io"`}, []string{r1}},
		{[]string{"--id-prefix", r2}, []string{r2}},
		{[]string{"--id-prefix", strings.ToUpper(r2[:22])}, []string{r2}},
		{[]string{"--since", "1h"}, []string{r3, r2, r1}},
		{[]string{"--until", "1h"}, nil},
		{[]string{"--since", "1h", "--input", "input.customer.id=2", "--id-prefix", r2[:10]}, []string{r2}},
	} {
		got := ids(c.args...)
		// Runs started within one millisecond list by ID, descending.
		slices.Sort(got)
		want := slices.Clone(c.want)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("list %v = %v, want %v", c.args, got, want)
		}
	}

	// --max-scan 1 examines one run a page: each page but the last says
	// so, with the cursor that goes on, and the pages find r2 alone.
	var found []string
	limited := 0
	args := []string{"list", "--json", "--input", "input.customer.id=2", "--max-scan", "1"}
	for page := 0; ; page++ {
		if page > 5 {
			t.Fatal("more than 5 pages")
		}
		r := e.run(args...)
		mustSucceed(t, r)
		var runs []workflow.Run
		decode(t, r.stdout, &runs)
		for _, run := range runs {
			found = append(found, run.ID)
		}
		if r.stderr == "" {
			break
		}
		cursor, ok := strings.CutPrefix(strings.TrimSuffix(r.stderr, "\n"),
			"search stopped after examining 1 runs (--max-scan); older runs not searched yet: add --cursor ")
		if !ok {
			t.Fatalf("list --max-scan 1: %v", r)
		}
		limited++
		args = []string{"list", "--json", "--input", "input.customer.id=2", "--max-scan", "1", "--cursor", cursor}
	}
	if !slices.Equal(found, []string{r2}) || limited < 2 {
		t.Errorf("list --max-scan 1, followed: %v after %d limited pages, want [%s] after 2 or more", found, limited, r2)
	}
}

// TestListSearchRefusesBadSyntax: a bad search flag exits 2 with one line
// naming the flag and the position in it, before connecting.
func TestListSearchRefusesBadSyntax(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--input", "customer.id=1"}, "list: invalid --input: position 1: want a condition input.<path>=<value>"},
		{[]string{"--input", "input.a=1", "--input", "input.b!=2"}, `list: invalid --input: position 8: only "=" is supported`},
		{[]string{"--input", `input.a="x`}, "list: invalid --input: position 9: a quoted value that is not a JSON string"},
		{[]string{"--id-prefix", "01u"}, `list: invalid --id-prefix: position 3: "u" is not a character of a run ID`},
		{[]string{"--id-prefix", ""}, "list: invalid --id-prefix: want 1 to 26 characters"},
		{[]string{"--since", "yesterday"}, `list: invalid --since: "yesterday": want an RFC 3339 time`},
		{[]string{"--until", "-1h"}, "list: invalid --until"},
		{[]string{"--since", "1h", "--until", "2h"}, "list: --until ("},
		{[]string{"--max-scan", "0"}, "list: invalid --max-scan 0: want 1 to 10000"},
		{[]string{"--max-scan", "10001"}, "list: invalid --max-scan 10001"},
	} {
		r := e.run(append([]string{"list"}, c.args...)...)
		checkOneErrorLine(t, r, 2, c.msg)
	}
}
