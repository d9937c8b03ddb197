package dashboard

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// How the run page shows a JSON document (a step's or compensation's
// output, the run's input): pretty-printed on the server, folded in a
// <details> past outputFoldLines lines or outputFoldBytes bytes, and cut
// past outputMaxBytes bytes with a link to the API, which has it whole.
// The document is the one GET /api/v1/workflows/{id} answers: the page
// reads the run with the API's loadRun, so that it sees exactly what the
// API shows the caller.
const (
	outputFoldLines = 20
	outputFoldBytes = 2 << 10
	outputMaxBytes  = 64 << 10
	// outputMaxIndent bounds the indentation, in levels: deeper levels
	// are shown at this depth, so that a deeply nested document does not
	// spend the page on spaces.
	outputMaxIndent = 24
)

// jsonBlock is a JSON document as the run page shows it.
type jsonBlock struct {
	// Key names the block in the page (data-output), so that the script
	// keeps a block the operator opened open across live refreshes.
	Key string
	// Label is what the block shows: "Output", "Input".
	Label string
	// Text is the document, indented (valid UTF-8; the template escapes
	// it).
	Text string
	// Size is the document's size in bytes as stored; Lines the lines of
	// Text.
	Size, Lines int
	// Folded: the block is long, shown in a closed <details>.
	Folded bool
	// More is the bytes of the document past the cap, not shown (0: all
	// of it is); API the URL that has it whole.
	More int
	API  string
	// Invalid: the document is not valid JSON (shown as stored).
	Invalid bool
}

// newJSONBlock returns the block of a document, nil for none (absent or
// null: a step that returned nothing).
func newJSONBlock(key, label, api string, raw json.RawMessage) *jsonBlock {
	trimmed := strings.TrimSpace(string(raw))
	if trimmed == "" || trimmed == "null" {
		return nil
	}
	b := &jsonBlock{Key: key, Label: label, API: api, Size: len(raw)}
	var text []byte
	var used int
	if json.Valid(raw) {
		text, used = indentJSON(raw, outputMaxBytes)
	} else {
		b.Invalid = true
		used = min(len(raw), outputMaxBytes)
		text = raw[:used]
	}
	if used < len(raw) {
		// Cut at a character, not inside one.
		for range utf8.UTFMax - 1 {
			if r, n := utf8.DecodeLastRune(text); len(text) == 0 || r != utf8.RuneError || n != 1 {
				break
			}
			text = text[:len(text)-1]
		}
		b.More = len(raw) - used
	}
	b.Text = strings.ToValidUTF8(string(text), "\uFFFD")
	b.Lines = strings.Count(b.Text, "\n") + 1
	b.Folded = b.Lines > outputFoldLines || len(b.Text) > outputFoldBytes || b.More > 0
	return b
}

// indentJSON indents valid JSON as json.Indent does (two spaces, "key":
// value), at most outputMaxIndent levels deep, and stops once the result
// reaches limit bytes: it returns the indented text and how many bytes of
// raw it covers. Unlike json.Indent it needs no more memory than limit,
// however large or deep the document.
func indentJSON(raw []byte, limit int) (out []byte, used int) {
	out = make([]byte, 0, min(limit, 2*len(raw)+64))
	depth := 0
	inString, escaped, open := false, false, false
	newline := func() {
		out = append(out, '\n')
		for range min(depth, outputMaxIndent) {
			out = append(out, ' ', ' ')
		}
	}
	for i, c := range raw {
		if len(out) >= limit {
			return out[:limit], i
		}
		if inString {
			out = append(out, c)
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		if open && c != '}' && c != ']' {
			// The first member of an object or array: on its own line.
			open = false
			depth++
			newline()
		}
		switch c {
		case '{', '[':
			out = append(out, c)
			open = true
		case '}', ']':
			if open {
				open = false // empty: {} or []
			} else {
				depth--
				newline()
			}
			out = append(out, c)
		case ',':
			out = append(out, c)
			newline()
		case ':':
			out = append(out, c, ' ')
		case '"':
			out = append(out, c)
			inString = true
		default:
			out = append(out, c)
		}
	}
	// (The last bytes may go a line's indentation past limit: the
	// document is all there.)
	return out, len(raw)
}
