package core_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/core"
)

func TestInputFilterMatches(t *testing.T) {
	t.Parallel()
	input := `{"customer":{"id":42,"name":"Ann","tags":["a","b"]},"email":"a@b.c","vip":true,"note":null,
		"total":"42","big":12345678901234567890,"a.b":1,"items":[{"sku":"A-1"},{"sku":"B-2"}],"amount":10.50}`
	for _, c := range []struct {
		filter string
		want   bool
	}{
		{`input.customer.id=42`, true},
		{`input.customer.id=42.0`, true},
		{`input.customer.id=4.2e1`, true},
		{`input.customer.id=43`, false},
		{`input.customer.id="42"`, false}, // a string is not a number
		{`input.total=42`, false},         // nor a number a string
		{`input.total="42"`, true},
		{`input.email="a@b.c"`, true},
		{`input.email=a@b.c`, true}, // a bare word is a string
		{`input.email="A@B.C"`, false},
		{`input.vip=true`, true},
		{`input.vip=false`, false},
		{`input.vip="true"`, false},
		{`input.note=null`, true},
		{`input.missing=null`, false},
		{`input.big=12345678901234567890`, true},
		{`input.big=12345678901234567891`, false}, // exact, not as float64
		{`input."a.b"=1`, true},
		{`input.items.1.sku=B-2`, true},
		{`input.items.01.sku=B-2`, false},
		{`input.items.2.sku=B-2`, false},
		{`input.customer.tags.0=a`, true},
		{`input.customer=42`, false}, // an object equals nothing
		{`input.amount=10.5`, true},
		{`input.customer.id=42 input.email="a@b.c"`, true},
		{`input.customer.id=42   input.vip=false`, false},
		{"input.customer.name=\"Ann\"\tinput.items.0.sku=A-1", true},
	} {
		f, err := core.ParseInputFilter(c.filter)
		if err != nil {
			t.Errorf("%s: %v", c.filter, err)
			continue
		}
		if got := f.Match([]byte(input)); got != c.want {
			t.Errorf("%s: match %v, want %v", c.filter, got, c.want)
		}
	}
	f, _ := core.ParseInputFilter(`input.a=1`)
	for _, in := range []string{``, `not json`, `[1]`, `{"a":"1"}`, `{"a":{"1":1}}`} {
		if f.Match([]byte(in)) {
			t.Errorf("input.a=1 matches %q", in)
		}
	}
	if got := f.String(); got != "input.a=1" {
		t.Errorf("String() = %q", got)
	}
}

func TestInputFilterRefusesWithPosition(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		filter string
		pos    int
		msg    string
	}{
		{``, 0, "no condition"},
		{`   `, 0, "no condition"},
		{`customer.id=42`, 1, "want a condition input.<path>=<value>"},
		{`input=42`, 6, `want a path after "input"`},
		{`input.a!=1`, 8, `only "=" is supported`},
		{`input.a>1`, 8, `only "=" is supported`},
		{`input.a==1`, 9, `only "=" is supported`},
		{`input.a`, 8, `want "=" and a value`},
		{`input.a=`, 9, "want a value"},
		{`input.a= 1`, 9, "want a value"},
		{`input..a=1`, 7, "want a path segment"},
		{`input.a b=1`, 8, `want "=" and a value`},
		{`input.a="x`, 9, "not a JSON string"},
		{`input.a="x"y`, 12, "want white space"},
		{`input.a=x"y"`, 10, "a quote inside a word"},
		{`input.a=1 bogus`, 11, "want a condition"},
		{`input.a/b=1`, 8, `want "." and a path segment`},
		{`input."a=1`, 7, "quoted segment"},
		{strings.Repeat("input.a=1 ", 9), 81, "more than 8 conditions"},
		{"input." + strings.Repeat("a.", 16) + "a=1", 39, "deeper than 16"},
		{"input.a=" + strings.Repeat("x", 1100), 0, "longer than 1024 bytes"},
		{"input.a=\xff", 0, "not valid UTF-8"},
	} {
		_, err := core.ParseInputFilter(c.filter)
		var se *core.SearchError
		if !errors.As(err, &se) || !errors.Is(err, core.ErrInvalidSearch) {
			t.Errorf("%q: error %v, want a SearchError", c.filter, err)
			continue
		}
		if se.Pos != c.pos || !strings.Contains(se.Msg, c.msg) || se.Filter != "input" {
			t.Errorf("%q: %+v, want position %d and %q", c.filter, se, c.pos, c.msg)
		}
	}
}

func TestParseIDPrefix(t *testing.T) {
	t.Parallel()
	id := core.NewRunID(time.Now())
	if p, err := core.ParseIDPrefix(strings.ToUpper(id[:8])); err != nil || p != id[:8] {
		t.Errorf("upper case prefix: %q, %v", p, err)
	}
	if p, err := core.ParseIDPrefix(id); err != nil || p != id {
		t.Errorf("whole ID: %q, %v", p, err)
	}
	for _, c := range []struct {
		in  string
		pos int
	}{{"", 0}, {id + "0", 0}, {"01u", 3}, {"0<", 2}, {"ab-", 3}, {"i", 1}} {
		_, err := core.ParseIDPrefix(c.in)
		var se *core.SearchError
		if !errors.As(err, &se) || se.Pos != c.pos {
			t.Errorf("%q: %v, want position %d", c.in, err, c.pos)
		}
	}
}

func TestParseTimeBound(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"2026-11-28T08:30:00Z":      time.Date(2026, 11, 28, 8, 30, 0, 0, time.UTC),
		"2026-11-28T08:30:00+01:00": time.Date(2026, 11, 28, 7, 30, 0, 0, time.UTC),
		"2026-11-28T08:30:00.5Z":    time.Date(2026, 11, 28, 8, 30, 0, 5e8, time.UTC),
		"2026-11-28":                time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC),
		"24h":                       now.Add(-24 * time.Hour),
		"90m":                       now.Add(-90 * time.Minute),
		"1h30m":                     now.Add(-90 * time.Minute),
		"7d":                        now.Add(-7 * 24 * time.Hour),
		"0s":                        now,
	} {
		got, err := core.ParseTimeBound("since", in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("%q: %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "yesterday", "-1h", "+1h", "1.5d", "-1d", "d", "2026-13-01", "99999999h",
		"<script>", strings.Repeat("1", 65)} {
		_, err := core.ParseTimeBound("until", in, now)
		var se *core.SearchError
		if !errors.As(err, &se) || se.Filter != "until" {
			t.Errorf("%q: %v, want a SearchError of until", in, err)
		}
	}
}
