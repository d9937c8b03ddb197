package workflow_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cairnhq/cairn/workflow"
)

func TestCheckJSON(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want string // the error; "" for none
	}{
		{`{}`, ""},
		{`  {"a": 1, "b": [1, "x", {"a": 2}], "c": {"a": {"a": null}}}  `, ""},
		{`"\ufffd \u00e9 \ud83d\ude00 é 😀"`, ""},
		{`{"a": 1, "\u0062": 2, "A": 3}`, ""},
		{`[{"a": 1}, {"a": 2}]`, ""},
		{`{"a": 1, "a": 2}`, `a: duplicate key "a" at byte 9`},
		{`{"user": {"name": "x", "id": 1, "name": "y"}}`, `user.name: duplicate key "name" at byte 32`},
		{`{"a": 1, "\u0061": 2}`, `a: duplicate key "a" at byte 9`},
		{`{"items": [1, {"k": 1, "k": 2}]}`, `items[1].k: duplicate key "k" at byte 23`},
		{`{"a b": {"c": 1, "c": 2}}`, `["a b"].c: duplicate key "c" at byte 17`},
		{"{\"name\": \"a\xffb\"}", `name: invalid UTF-8 in a string (byte 0xff) at byte 11`},
		{"[\"ok\", \"\xed\xa0\x80\"]", `[1]: invalid UTF-8 in a string (byte 0xed) at byte 8`},
		{"{\"k\xc3\": 1}", `invalid UTF-8 in a key (byte 0xc3) at byte 3`},
		{"{\"o\": {\"k\xc3\": 1}}", `o: invalid UTF-8 in a key (byte 0xc3) at byte 9`},
		{`{"name": "\ud800"}`, `name: lone surrogate \ud800 in a string at byte 10`},
		{`{"name": "x\ud800\u0041"}`, `name: lone surrogate \ud800 in a string at byte 11`},
		{`["\udc00"]`, `[0]: lone surrogate \udc00 in a string at byte 2`},
		{`"\ud83d"`, `lone surrogate \ud83d in a string at byte 1`},
	} {
		err := workflow.CheckJSON([]byte(c.in))
		got := ""
		if err != nil {
			got = err.Error()
			if _, ok := errors.AsType[*workflow.JSONError](err); !ok {
				t.Errorf("CheckJSON(%q): %T, want a *JSONError", c.in, err)
			}
		}
		if got != c.want {
			t.Errorf("CheckJSON(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	// Objects of more than 16 keys are checked through a set.
	var big strings.Builder
	big.WriteString(`{"x": {`)
	for i := range 20 {
		big.WriteString(`"k` + strconv.Itoa(i) + `": {"k0": 0}, `)
	}
	inner := big.Len()
	for _, c := range []struct{ tail, want string }{
		{`"k20": 1}, "y": 1}`, ""},
		{`"k3": 1}}`, `x.k3: duplicate key "k3" at byte ` + strconv.Itoa(inner)},
		{`"\u006b19": 1}}`, `x.k19: duplicate key "k19" at byte ` + strconv.Itoa(inner)},
		{`"k20": 1}, "x": 2}`, `x: duplicate key "x" at byte ` + strconv.Itoa(inner+11)},
	} {
		in := big.String() + c.tail
		got := ""
		if err := workflow.CheckJSON([]byte(in)); err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("a large object ending %s: %q, want %q", c.tail, got, c.want)
		}
	}
	for _, in := range []string{`{"a": }`, `{} {}`, ``, `"\x"`, "\"a\x01\""} {
		if _, ok := errors.AsType[*json.SyntaxError](workflow.CheckJSON([]byte(in))); !ok {
			t.Errorf("CheckJSON(%q) = %v, want a *json.SyntaxError", in, workflow.CheckJSON([]byte(in)))
		}
	}
}

// TestCheckJSONLarge: many keys and deep nesting pass, in one pass.
func TestCheckJSONLarge(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("{")
	for i := range 50000 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"k` + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + strconv.Itoa(i) + `": [1]`)
	}
	b.WriteString("}")
	if err := workflow.CheckJSON([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	deep := strings.Repeat(`{"a":[`, 4000) + strings.Repeat("]}", 4000) // json.Valid stops at 10,000 levels
	if err := workflow.CheckJSON([]byte(deep)); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkCheckJSON: a run input of about 1 KB.
func BenchmarkCheckJSON(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"order": {"id": "o-42", "lines": [`)
	for i := range 12 {
		if i > 0 {
			sb.WriteString(",")
		}
		sb.WriteString(`{"sku": "SKU-` + strconv.Itoa(i) + `", "qty": 2, "price": 19.99, "note": "caf\u00e9 é"}`)
	}
	sb.WriteString(`]}, "customer": {"name": "Ann", "email": "ann@example.com"}}`)
	data := []byte(sb.String())
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if err := workflow.CheckJSON(data); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzCheckJSON compares CheckJSON with a slower reading of the same rules
// through json.Decoder's token stream: they accept the same texts.
func FuzzCheckJSON(f *testing.F) {
	for _, seed := range []string{`{}`, `{"a":1,"a":2}`, `{"a":{"b":[1,{"c":"\ud800"}]}}`, "[\"\xff\"]",
		`{"\u0061":1,"a":2}`, `"\ud83d\ude00"`, `[1, 2e5, -0.5, true, null, "x\n\"y"]`, `{"a":[],"b":{},"a":3}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return
		}
		want := referenceCheck(data)
		err := workflow.CheckJSON(data)
		if (err == nil) != want {
			t.Fatalf("CheckJSON(%q) = %v, the reference says ok=%v", data, err, want)
		}
	})
}

// referenceCheck reads a valid JSON text token by token: false when a
// string or key, as written, is not valid UTF-8 or holds a lone surrogate,
// or an object has a key twice.
func referenceCheck(data []byte) bool {
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.UseNumber()
	type frame struct {
		keys    map[string]bool
		object  bool
		wantKey bool
	}
	var stack []*frame
	prev := int64(0)
	for {
		tok, err := dec.Token()
		if err != nil {
			return true
		}
		end := dec.InputOffset()
		raw := data[prev:end]
		prev = end
		top := (*frame)(nil)
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				stack = append(stack, &frame{keys: map[string]bool{}, object: v == '{', wantKey: v == '{'})
				continue
			default:
				stack = stack[:len(stack)-1]
			}
		case string:
			lit := raw[bytes.IndexByte(raw, '"'):]
			var s string
			if json.Unmarshal(lit, &s) != nil {
				return false
			}
			// Valid text whose escapes are all real characters decodes and
			// encodes back without U+FFFD where the text had none.
			if !utf8.Valid(lit) || (strings.Contains(s, "\ufffd") && !strings.Contains(string(lit), "\ufffd") &&
				!strings.Contains(strings.ToLower(string(lit)), `\ufffd`)) {
				return false
			}
			if top != nil && top.object && top.wantKey {
				if top.keys[s] {
					return false
				}
				top.keys[s] = true
				top.wantKey = false
				continue
			}
		}
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].wantKey = true
		}
	}
}
