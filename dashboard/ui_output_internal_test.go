package dashboard

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestIndentJSONAsTheStandardLibrary: indentJSON lays out a document as
// json.Indent does, while it fits.
func TestIndentJSONAsTheStandardLibrary(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{
		`{}`, `[]`, `null`, `1`, `"s"`, `{"a":1}`, `[1,2,[],{},[3]]`,
		` { "a" : [ 1 , { "b" : "x\"y\\" } ] , "c" : { } } `,
		`{"s":"{[,:]}\\\"","t":"\u00e9\n"}`,
		`[[[[{"deep":[true,false,null]}]]]]`,
	} {
		var want bytes.Buffer
		if err := json.Indent(&want, []byte(doc), "", "  "); err != nil {
			t.Fatal(err)
		}
		got, used := indentJSON([]byte(doc), 1<<20)
		if string(got) != strings.TrimSpace(want.String()) || used != len(doc) {
			t.Errorf("indentJSON(%s) = %q (%d of %d bytes), want %q", doc, got, used, len(doc), want.String())
		}
	}
}

// TestJSONBlock: folding, cutting, invalid documents and invalid UTF-8.
func TestJSONBlock(t *testing.T) {
	t.Parallel()
	for _, none := range []string{"", "null", "  null "} {
		if b := newJSONBlock("k", "Output", "/api", json.RawMessage(none)); b != nil {
			t.Errorf("%q: block %+v, want none", none, b)
		}
	}
	small := newJSONBlock("k", "Output", "/api", json.RawMessage(`{"a":[1,2]}`))
	if small.Folded || small.More != 0 || small.Lines != 6 || small.Size != 11 || small.Invalid {
		t.Errorf("small: %+v", small)
	}
	lines := newJSONBlock("k", "Output", "/api", json.RawMessage("["+strings.Repeat("1,", outputFoldLines)+"1]"))
	if !lines.Folded || lines.More != 0 {
		t.Errorf("%d lines: folded %v, more %d", lines.Lines, lines.Folded, lines.More)
	}
	wide := newJSONBlock("k", "Output", "/api", json.RawMessage(`"`+strings.Repeat("x", outputFoldBytes)+`"`))
	if !wide.Folded || wide.Lines != 1 {
		t.Errorf("wide: folded %v, %d lines", wide.Folded, wide.Lines)
	}
	// Past the cap: cut, and at a character, never inside one.
	raw := `"` + strings.Repeat("é", outputMaxBytes) + `"`
	big := newJSONBlock("k", "Output", "/api", json.RawMessage(raw))
	if !big.Folded || big.More <= 0 || len(big.Text) > outputMaxBytes || !utf8.ValidString(big.Text) ||
		strings.ContainsRune(big.Text, utf8.RuneError) || len(big.Text)+big.More < len(raw)-1 || len(big.Text)+big.More > len(raw) {
		t.Errorf("big: %d bytes shown, %d more, of %d", len(big.Text), big.More, len(raw))
	}
	// Deeper than the standard library reads: shown as stored, cut.
	deep := strings.Repeat("[", 40000) + strings.Repeat("]", 40000)
	if b := newJSONBlock("k", "Output", "/api", json.RawMessage(deep)); !b.Invalid || b.More != len(deep)-outputMaxBytes {
		t.Errorf("deep: invalid %v, more %d", b.Invalid, b.More)
	}
	// Deep but valid: indentation stops at outputMaxIndent levels.
	d := newJSONBlock("k", "Output", "/api", json.RawMessage(strings.Repeat("[", 100)+strings.Repeat("]", 100)))
	for line := range strings.SplitSeq(d.Text, "\n") {
		if n := len(line) - len(strings.TrimLeft(line, " ")); n > 2*outputMaxIndent {
			t.Fatalf("a line indented %d spaces", n)
		}
	}
	bad := newJSONBlock("k", "Output", "/api", json.RawMessage("{\"x\":\"\xff\"}"))
	if !utf8.ValidString(bad.Text) || !strings.Contains(bad.Text, "\uFFFD") {
		t.Errorf("invalid UTF-8: %q", bad.Text)
	}
	if b := newJSONBlock("k", "Output", "/api", json.RawMessage(`{"a":`)); !b.Invalid || b.Text != `{"a":` {
		t.Errorf("truncated document: %+v", b)
	}
}
