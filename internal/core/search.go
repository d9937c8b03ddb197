package core

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Search: the filters of a run listing beyond status, workflow and owner
// (List's ListOptions): a run ID prefix, fields of the input, and the
// creation time. The syntax is docs/http-api.md's "Search"; a filter that
// does not parse is refused with an error wrapping ErrInvalidSearch that
// names the position of what is wrong.

// ErrInvalidSearch is wrapped by the errors of ParseInputFilter,
// ParseIDPrefix and ParseTimeBound (a *SearchError naming the position),
// and of Client.ListPage for a search it cannot run (a creation range
// that ends at or before its start, a MaxScan out of range).
var ErrInvalidSearch = errors.New("invalid search")

// Bounds of an input filter.
const (
	// MaxInputFilterLen is the longest input filter, in bytes.
	MaxInputFilterLen = 1024
	// MaxInputConditions is the most conditions an input filter holds.
	MaxInputConditions = 8
	// maxPathSegments is the deepest path of a condition.
	maxPathSegments = 16
)

// SearchError is a filter that does not parse: what is wrong, and where
// (Pos, the 1-based byte position in the filter's text; 0 for the whole).
type SearchError struct {
	// Filter names the filter: "input", "id prefix", "since" or "until".
	Filter string
	Pos    int
	Msg    string
}

func (e *SearchError) Error() string {
	if e.Pos > 0 {
		return fmt.Sprintf("%s: %s filter, position %d: %s", ErrInvalidSearch, e.Filter, e.Pos, e.Msg)
	}
	return fmt.Sprintf("%s: %s filter: %s", ErrInvalidSearch, e.Filter, e.Msg)
}

func (e *SearchError) Unwrap() error { return ErrInvalidSearch }

// InputFilter keeps the runs whose input has every one of its conditions:
// the JSON value at a dotted path equal to a string, a number, a boolean
// or null. Parse one with ParseInputFilter; the zero value has no
// condition and keeps every run.
type InputFilter struct {
	conds []inputCond
	text  string
}

// inputCond is one condition: the value at path equals want.
type inputCond struct {
	path []string
	want any // string, *big.Rat, bool or nil (JSON null)
}

// ParseInputFilter parses an input filter: one or more conditions
// separated by white space, all of which a run's input must have.
//
//	input.customer.id=42 input.email="a@b.c" input.items.0.sku=A-1 input.vip=true
//
// A condition is "input", a dotted path of one or more segments, "=" and a
// value. A segment is letters, digits, '_' and '-', or a JSON string in
// double quotes for any other key (input."a.b"=1); a segment of digits also
// indexes an array, from 0. The value is a JSON string ("a@b.c"), a JSON
// number (42, -1.5, 1e3: compared as numbers, exactly, so 42 matches 42.0),
// true, false or null; any other word without white space or quotes is a
// string (input.status=paid). A string does not match a number ("42" is not
// 42), nor an object or an array anything. Only "=" is supported.
func ParseInputFilter(s string) (*InputFilter, error) {
	bad := func(pos int, format string, a ...any) error {
		return &SearchError{Filter: "input", Pos: pos, Msg: fmt.Sprintf(format, a...)}
	}
	if len(s) > MaxInputFilterLen {
		return nil, bad(0, "longer than %d bytes", MaxInputFilterLen)
	}
	if !utf8.ValidString(s) {
		return nil, bad(0, "not valid UTF-8")
	}
	f := &InputFilter{}
	i := 0
	for {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i == len(s) {
			break
		}
		if len(f.conds) == MaxInputConditions {
			return nil, bad(i+1, "more than %d conditions", MaxInputConditions)
		}
		c, next, err := parseCond(s, i, bad)
		if err != nil {
			return nil, err
		}
		f.conds = append(f.conds, c)
		i = next
	}
	if len(f.conds) == 0 {
		return nil, bad(0, `no condition: want input.<path>=<value>, such as input.customer.id=42`)
	}
	f.text = strings.Join(strings.Fields(s), " ")
	return f, nil
}

func isSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }

func isSegmentByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_' || b == '-'
}

// parseCond parses the condition at s[i:], returning it and the index
// after it.
func parseCond(s string, i int, bad func(int, string, ...any) error) (inputCond, int, error) {
	var c inputCond
	if !strings.HasPrefix(s[i:], "input") {
		return c, 0, bad(i+1, `want a condition input.<path>=<value>, such as input.customer.id=42`)
	}
	i += len("input")
	for {
		if i == len(s) || isSpace(s[i]) {
			return c, 0, bad(i+1, `want "=" and a value after the path`)
		}
		switch s[i] {
		case '=':
			if len(c.path) == 0 {
				return c, 0, bad(i+1, `want a path after "input": input.<field>=<value>`)
			}
			want, next, err := parseValue(s, i+1, bad)
			if err != nil {
				return c, 0, err
			}
			c.want = want
			return c, next, nil
		case '.':
		case '!', '<', '>', '~':
			return c, 0, bad(i+1, `only "=" is supported`)
		default:
			return c, 0, bad(i+1, `want "." and a path segment, or "="`)
		}
		i++ // the '.'
		if len(c.path) == maxPathSegments {
			return c, 0, bad(i+1, "a path deeper than %d segments", maxPathSegments)
		}
		switch {
		case i < len(s) && s[i] == '"':
			seg, n, err := jsonString(s[i:])
			if err != nil {
				return c, 0, bad(i+1, "a quoted segment that is not a JSON string")
			}
			c.path = append(c.path, seg)
			i += n
		case i < len(s) && isSegmentByte(s[i]):
			j := i
			for j < len(s) && isSegmentByte(s[j]) {
				j++
			}
			c.path = append(c.path, s[i:j])
			i = j
		default:
			return c, 0, bad(i+1, `want a path segment: letters, digits, "_" and "-", or a JSON string in double quotes`)
		}
	}
}

// parseValue parses the value at s[i:], returning it and the index after
// it.
func parseValue(s string, i int, bad func(int, string, ...any) error) (any, int, error) {
	if i == len(s) || isSpace(s[i]) {
		return nil, 0, bad(i+1, `want a value after "=": a string, a number, true, false or null`)
	}
	if s[i] == '"' {
		v, n, err := jsonString(s[i:])
		if err != nil {
			return nil, 0, bad(i+1, "a quoted value that is not a JSON string (a closing quote missing, or a bad escape)")
		}
		if j := i + n; j < len(s) && !isSpace(s[j]) {
			return nil, 0, bad(j+1, "want white space after the quoted value")
		}
		return v, i + n, nil
	}
	j := i
	for j < len(s) && !isSpace(s[j]) {
		if s[j] == '"' {
			return nil, 0, bad(j+1, `a quote inside a word: quote the whole value ("...")`)
		}
		if s[j] == '=' && j == i {
			return nil, 0, bad(j+1, `only "=" is supported`)
		}
		j++
	}
	word := s[i:j]
	switch word {
	case "true":
		return true, j, nil
	case "false":
		return false, j, nil
	case "null":
		return nil, j, nil
	}
	if n, ok := jsonNumber(word); ok {
		return n, j, nil
	}
	return word, j, nil
}

// jsonString reads the JSON string at the start of s: its value and its
// length in s.
func jsonString(s string) (string, int, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	var v string
	if err := dec.Decode(&v); err != nil {
		return "", 0, err
	}
	n := int(dec.InputOffset())
	if n < 2 || s[n-1] != '"' {
		return "", 0, errors.New("not a string")
	}
	return v, n, nil
}

// jsonNumber reads word as a JSON number, exactly.
func jsonNumber(word string) (*big.Rat, bool) {
	if word == "" || !json.Valid([]byte(word)) || (word[0] != '-' && (word[0] < '0' || word[0] > '9')) {
		return nil, false
	}
	if len(word) > 64 {
		return nil, false
	}
	r, ok := new(big.Rat).SetString(word)
	return r, ok
}

// String returns the filter as parsed, its conditions separated by one
// space ("" for the zero filter).
func (f *InputFilter) String() string {
	if f == nil {
		return ""
	}
	return f.text
}

// Empty reports whether the filter has no condition (it keeps every run).
func (f *InputFilter) Empty() bool { return f == nil || len(f.conds) == 0 }

// Match reports whether a run's input (JSON) has every condition of f. An
// input that is not JSON matches no condition.
func (f *InputFilter) Match(input []byte) bool {
	if f.Empty() {
		return true
	}
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return false
	}
	for _, c := range f.conds {
		if !c.match(doc) {
			return false
		}
	}
	return true
}

func (c inputCond) match(doc any) bool {
	v := doc
	for _, seg := range c.path {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[seg]; !ok {
				return false
			}
		case []any:
			n, err := strconv.Atoi(seg)
			if err != nil || n < 0 || n >= len(x) || (len(seg) > 1 && seg[0] == '0') {
				return false
			}
			v = x[n]
		default:
			return false
		}
	}
	switch want := c.want.(type) {
	case nil:
		return v == nil
	case bool:
		got, ok := v.(bool)
		return ok && got == want
	case string:
		got, ok := v.(string)
		return ok && got == want
	case *big.Rat:
		got, ok := v.(json.Number)
		if !ok || len(got) > 64 {
			return false
		}
		r, ok := new(big.Rat).SetString(string(got))
		return ok && r.Cmp(want) == 0
	}
	return false
}

// ParseIDPrefix checks a run ID prefix: 1 to 26 characters of a run ID
// (Crockford's base 32: digits and letters but i, l, o and u), read in
// either case. It returns the prefix in lower case, as run IDs are.
func ParseIDPrefix(s string) (string, error) {
	if s == "" || len(s) > RunIDLen {
		return "", &SearchError{Filter: "id prefix", Msg: fmt.Sprintf("want 1 to %d characters of a run ID", RunIDLen)}
	}
	p := strings.ToLower(s)
	for i := range len(p) {
		if CrockfordIndex[p[i]] < 0 {
			return "", &SearchError{Filter: "id prefix", Pos: i + 1,
				Msg: fmt.Sprintf("%q is not a character of a run ID (digits and letters but i, l, o and u)", s[i:i+1])}
		}
	}
	return p, nil
}

// ParseTimeBound reads a bound of a creation-time range (filter names it:
// "since" or "until"): an RFC 3339 time (2026-11-29T08:00:00Z), a date
// (2026-11-29, midnight UTC), or a duration before now: a whole number and
// a unit, s, m, h or d (days of 24 hours), or Go's forms (90m, 1h30m).
func ParseTimeBound(filter, s string, now time.Time) (time.Time, error) {
	bad := func(msg string) error { return &SearchError{Filter: filter, Msg: msg} }
	if s == "" {
		return time.Time{}, bad("empty")
	}
	if len(s) > 64 {
		return time.Time{}, bad("longer than 64 bytes")
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	d, err := relDuration(s)
	if err != nil {
		return time.Time{}, bad(fmt.Sprintf("%q: want an RFC 3339 time (2026-11-29T08:00:00Z), a date (2026-11-29) "+
			"or a duration before now (30m, 24h, 7d)", s))
	}
	return now.Add(-d), nil
}

// relDuration reads a duration before now: "<n>d", or time.ParseDuration's
// forms; never negative, at most 100 years.
func relDuration(s string) (time.Duration, error) {
	const most = 100 * 365 * 24 * time.Hour
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 || n > 100*365 || days[0] == '+' || days[0] == '-' {
			return 0, errors.New("bad days")
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d > most || s[0] == '+' || s[0] == '-' {
		return 0, errors.New("bad duration")
	}
	return d, nil
}
