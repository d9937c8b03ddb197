package core

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// JSONError is what CheckJSON refuses in a JSON text, and where: Offset
// is the number of bytes before the offending byte (from 0), Path the
// value's place, such as user.name or items[2] ("" for the top).
type JSONError struct {
	Offset int64
	Path   string
	Msg    string
}

// Error returns "PATH: MSG at byte OFFSET", without the path at the top.
func (e *JSONError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("%s at byte %d", e.Msg, e.Offset)
	}
	return fmt.Sprintf("%s: %s at byte %d", e.Path, e.Msg, e.Offset)
}

// CheckJSON checks that data is one JSON value (white space around it
// allowed) that every reader takes the same way: its strings, keys
// included, are valid UTF-8 without lone surrogates, written as bytes or
// as \u escapes (encoding/json would turn each into U+FFFD, other readers
// refuse the text), and no object has a key twice (readers keep the first
// or the last, or refuse it). A problem is a *JSONError; a text that is not
// one JSON value, a *json.SyntaxError. Start and Signal refuse what it
// refuses, wrapping ErrInvalidInput.
//
// It reads the text once after json.Valid: time linear in its length,
// memory in its keys and nesting, and no allocation for objects of up to
// 16 keys without escapes.
func CheckJSON(data []byte) error {
	if !json.Valid(data) {
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			return err
		}
		return &json.SyntaxError{Offset: int64(len(data))} // not reached: Valid and Unmarshal agree
	}
	c := jsonChecker{data: data}
	return c.check()
}

// smallObject is the number of keys an object's duplicates are looked for
// among by comparison; a larger object gets a set.
const smallObject = 16

// jsonChecker walks a text json.Valid accepted.
type jsonChecker struct {
	data  []byte
	stack []jsonFrame
	keys  [][]byte // the keys of the open objects, decoded, frame by frame
}

// jsonFrame is an open object or array.
type jsonFrame struct {
	object  bool
	wantKey bool                // object: the next string is a key
	key     []byte              // object: the last key, decoded
	first   int                 // object: its first key in jsonChecker.keys
	set     map[string]struct{} // object: its keys, once it has more than smallObject
	index   int                 // array: the values read so far
}

func (c *jsonChecker) check() error {
	d := c.data
	for i := 0; i < len(d); {
		switch d[i] {
		case ' ', '\t', '\r', '\n', ',', ':':
			i++
		case '{':
			c.stack = append(c.stack, jsonFrame{object: true, wantKey: true, first: len(c.keys)})
			i++
		case '[':
			c.stack = append(c.stack, jsonFrame{})
			i++
		case '}', ']':
			f := c.stack[len(c.stack)-1]
			if f.object {
				clear(c.keys[f.first:])
				c.keys = c.keys[:f.first]
			}
			c.stack = c.stack[:len(c.stack)-1]
			c.valueDone()
			i++
		case '"':
			end, err := c.str(i)
			if err != nil {
				return err
			}
			i = end
		default: // a number, true, false or null
			for i < len(d) && !endsScalar(d[i]) {
				i++
			}
			c.valueDone()
		}
	}
	return nil
}

// endsScalar reports the bytes that end a number or a literal.
func endsScalar(b byte) bool {
	switch b {
	case ' ', '\t', '\r', '\n', ',', ']', '}':
		return true
	}
	return false
}

// valueDone moves the innermost frame on after one of its values.
func (c *jsonChecker) valueDone() {
	if len(c.stack) == 0 {
		return
	}
	f := &c.stack[len(c.stack)-1]
	if f.object {
		f.wantKey = true
	} else {
		f.index++
	}
}

// str checks the string that starts at d[i], a key or a value, and returns
// the offset after it.
func (c *jsonChecker) str(i int) (int, error) {
	d := c.data
	isKey := len(c.stack) > 0 && c.stack[len(c.stack)-1].object && c.stack[len(c.stack)-1].wantKey
	bad := func(at int, what string) error {
		in := " in a string"
		if isKey {
			in = " in a key"
		}
		if strings.HasPrefix(what, "invalid UTF-8") {
			what = "invalid UTF-8" + in + what[len("invalid UTF-8"):]
		} else {
			what += in
		}
		return &JSONError{Offset: int64(at), Path: c.path(), Msg: what}
	}
	escaped := false
	j := i + 1
	for d[j] != '"' {
		switch b := d[j]; {
		case b == '\\' && d[j+1] == 'u':
			escaped = true
			r := hex4(d[j+2 : j+6])
			switch {
			case r >= 0xD800 && r < 0xDC00: // a high surrogate: a low one must follow
				if d[j+6] == '\\' && d[j+7] == 'u' {
					if lo := hex4(d[j+8 : j+12]); lo >= 0xDC00 && lo < 0xE000 {
						j += 12
						continue
					}
				}
				return 0, bad(j, fmt.Sprintf(`lone surrogate \u%04x`, r))
			case r >= 0xDC00 && r < 0xE000:
				return 0, bad(j, fmt.Sprintf(`lone surrogate \u%04x`, r))
			}
			j += 6
		case b == '\\':
			escaped = true
			j += 2
		case b < utf8.RuneSelf:
			j++
		default:
			r, n := utf8.DecodeRune(d[j:])
			if r == utf8.RuneError && n == 1 {
				return 0, bad(j, fmt.Sprintf("invalid UTF-8 (byte 0x%02x)", b))
			}
			j += n
		}
	}
	end := j + 1
	if !isKey {
		c.valueDone()
		return end, nil
	}
	key := d[i+1 : j]
	if escaped {
		var s string
		_ = json.Unmarshal(d[i:end], &s) // a valid string: it decodes
		key = []byte(s)
	}
	f := &c.stack[len(c.stack)-1]
	f.key, f.wantKey = key, false
	if c.seen(f, key) {
		return 0, &JSONError{Offset: int64(i), Path: c.path(), Msg: "duplicate key " + strconv.Quote(string(key))}
	}
	return end, nil
}

// seen reports whether object f has key already, and adds it.
func (c *jsonChecker) seen(f *jsonFrame, key []byte) bool {
	if f.set != nil {
		if _, dup := f.set[string(key)]; dup {
			return true
		}
		f.set[string(key)] = struct{}{}
		return false
	}
	own := c.keys[f.first:]
	for _, k := range own {
		if bytes.Equal(k, key) {
			return true
		}
	}
	if len(own) < smallObject {
		c.keys = append(c.keys, key)
		return false
	}
	f.set = make(map[string]struct{}, 2*smallObject)
	for _, k := range own {
		f.set[string(k)] = struct{}{}
	}
	clear(own)
	c.keys = c.keys[:f.first]
	f.set[string(key)] = struct{}{}
	return false
}

// path returns where the walk is: the keys and indexes of the open frames.
func (c *jsonChecker) path() string {
	var b strings.Builder
	for _, f := range c.stack {
		switch {
		case f.object && f.wantKey: // between keys: the object's own path
		case f.object && simpleKeyRE.Match(f.key):
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.Write(f.key)
		case f.object:
			b.WriteString("[" + strconv.Quote(string(f.key)) + "]")
		default:
			b.WriteString("[" + strconv.Itoa(f.index) + "]")
		}
	}
	return b.String()
}

// simpleKeyRE matches the keys a path writes after a dot.
var simpleKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// hex4 reads 4 hex digits (json.Valid has checked them).
func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}
