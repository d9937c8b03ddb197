package retrystate

// A small checker of the Lua sources, for the tests of lua_test.go: a lexer
// and a scope walk that finds the names a chunk uses without declaring
// them (its free names), the locals it declares at its top level, the
// statements that read KEYS and ARGV by name (local a, b = unpack(ARGV,
// ...)) and any read of KEYS or ARGV by index. The build never runs it:
// scripts.go assembles the scripts from their declared needs alone.

import (
	"fmt"
	"slices"
	"strings"
)

// luaTok is one token: a name, a keyword, a string, a number or a symbol.
type luaTok struct {
	kind byte // 'n' name, 'k' keyword, 's' string, 'd' number, 'p' symbol
	text string
	line int
}

var luaKeywords = map[string]bool{
	"and": true, "break": true, "do": true, "else": true, "elseif": true, "end": true, "false": true, "for": true,
	"function": true, "if": true, "in": true, "local": true, "nil": true, "not": true, "or": true, "repeat": true,
	"return": true, "then": true, "true": true, "until": true, "while": true,
}

// longBracket returns the length of the opening long bracket at s[i:]
// ("[[", "[=[", ...) and its level, or 0.
func longBracket(s string, i int) (n, level int) {
	if i >= len(s) || s[i] != '[' {
		return 0, 0
	}
	j := i + 1
	for j < len(s) && s[j] == '=' {
		j++
	}
	if j < len(s) && s[j] == '[' {
		return j - i + 1, j - i - 1
	}
	return 0, 0
}

// luaLex cuts Lua 5.1 source into tokens, without comments.
func luaLex(src string) ([]luaTok, error) {
	var out []luaTok
	line := 1
	i := 0
	isName := func(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	isDigit := func(c byte) bool { return c >= '0' && c <= '9' }
	closeLong := func(level int) (int, error) { // from i, past the closing bracket
		end := "]" + strings.Repeat("=", level) + "]"
		k := strings.Index(src[i:], end)
		if k < 0 {
			return 0, fmt.Errorf("line %d: unclosed long bracket", line)
		}
		line += strings.Count(src[i:i+k], "\n")
		return i + k + len(end), nil
	}
	for i < len(src) {
		c := src[i]
		switch {
		case c == '\n':
			line++
			i++
		case c == ' ' || c == '\t' || c == '\r':
			i++
		case strings.HasPrefix(src[i:], "--"):
			i += 2
			if n, level := longBracket(src, i); n > 0 {
				i += n
				j, err := closeLong(level)
				if err != nil {
					return nil, err
				}
				i = j
				continue
			}
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'':
			j := i + 1
			for j < len(src) && src[j] != c {
				if src[j] == '\\' {
					j++
				}
				if j < len(src) && src[j] == '\n' {
					line++
				}
				j++
			}
			if j >= len(src) {
				return nil, fmt.Errorf("line %d: unclosed string", line)
			}
			out = append(out, luaTok{'s', src[i : j+1], line})
			i = j + 1
		case c == '[':
			if n, level := longBracket(src, i); n > 0 {
				start, l := i, line
				i += n
				j, err := closeLong(level)
				if err != nil {
					return nil, err
				}
				out = append(out, luaTok{'s', src[start:j], l})
				i = j
				continue
			}
			out = append(out, luaTok{'p', "[", line})
			i++
		case isName(c):
			j := i
			for j < len(src) && (isName(src[j]) || isDigit(src[j])) {
				j++
			}
			k := byte('n')
			if luaKeywords[src[i:j]] {
				k = 'k'
			}
			out = append(out, luaTok{k, src[i:j], line})
			i = j
		case isDigit(c) || c == '.' && i+1 < len(src) && isDigit(src[i+1]):
			j := i
			for j < len(src) && (isName(src[j]) || isDigit(src[j]) || src[j] == '.' ||
				(src[j] == '-' || src[j] == '+') && (src[j-1] == 'e' || src[j-1] == 'E')) {
				j++
			}
			out = append(out, luaTok{'d', src[i:j], line})
			i = j
		default:
			n := 1
			for _, op := range []string{"...", "..", "==", "~=", "<=", ">="} {
				if strings.HasPrefix(src[i:], op) {
					n = len(op)
					break
				}
			}
			out = append(out, luaTok{'p', src[i : i+n], line})
			i += n
		}
	}
	return out, nil
}

// luaUnpack is a statement "local a, b = unpack(KEYS ...)" or "... =
// unpack(ARGV ...)": the names it reads the script's arguments into.
type luaUnpack struct {
	of    string // "KEYS" or "ARGV"
	names []string
	// from is where the read starts: "1" for unpack(ARGV) and unpack(ARGV,
	// 1, ...), the expression's first token otherwise (a cursor: "at").
	from string
	top  bool // at the chunk's top level
	line int
}

// luaScan is what scanLua finds in a chunk.
type luaScan struct {
	free    map[string]int // names used and not declared, with the line of the first use
	top     []string       // the locals declared at the top level, in order
	unpacks []luaUnpack
	indexed []int // lines that read KEYS or ARGV by index (KEYS[...], ARGV[...])
}

// scanLua walks a chunk's tokens with its scopes: each block (function,
// do, then, else, repeat) declares its locals, parameters and loop
// variables; a name not declared in an enclosing block is free. A name
// after "." or ":" is a field, and one before "=" in a table constructor a
// key: neither is a use. (A local is taken to be in scope from its name
// on, where Lua has it from the end of its statement: "local x = x" would
// not find an outer x. No source here does that.)
func scanLua(src string) (luaScan, error) {
	toks, err := luaLex(src)
	if err != nil {
		return luaScan{}, err
	}
	s := luaScan{free: map[string]int{}}
	scopes := []map[string]bool{{}}
	var blocks []string // the open blocks: function, do, then, else, repeat
	open := func(kind string) {
		blocks = append(blocks, kind)
		scopes = append(scopes, map[string]bool{})
	}
	closeBlock := func(line int) error {
		if len(blocks) == 0 {
			return fmt.Errorf("line %d: end without a block", line)
		}
		blocks = blocks[:len(blocks)-1]
		scopes = scopes[:len(scopes)-1]
		return nil
	}
	declare := func(name string) {
		scopes[len(scopes)-1][name] = true
		if len(scopes) == 1 {
			s.top = append(s.top, name)
		}
	}
	declared := func(name string) bool {
		for _, sc := range slices.Backward(scopes) {
			if sc[name] {
				return true
			}
		}
		return false
	}
	var brackets []string // open (, [ and {
	// pending holds names to declare in the next block opened (a for
	// loop's variables, a function's parameters).
	var pending []string
	at := func(i int) luaTok {
		if i < 0 || i >= len(toks) {
			return luaTok{}
		}
		return toks[i]
	}
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		switch {
		case t.kind == 'k' && t.text == "local":
			if n := at(i + 1); n.kind == 'k' && n.text == "function" {
				name := at(i + 2)
				declare(name.text)
				params, j, err := funcParams(toks, i+3)
				if err != nil {
					return s, err
				}
				i = j
				open("function")
				for _, p := range params {
					declare(p)
				}
				continue
			}
			var names []string
			j := i + 1
			for at(j).kind == 'n' {
				names = append(names, at(j).text)
				if at(j+1).text != "," {
					break
				}
				j += 2
			}
			if len(names) == 0 {
				return s, fmt.Errorf("line %d: local without a name", t.line)
			}
			if at(j+1).text == "=" && at(j+2).text == "unpack" && at(j+3).text == "(" &&
				(at(j+4).text == "KEYS" || at(j+4).text == "ARGV") {
				from := "1"
				if at(j+5).text == "," {
					from = at(j + 6).text
				}
				s.unpacks = append(s.unpacks, luaUnpack{of: at(j + 4).text, names: names, from: from,
					top: len(scopes) == 1, line: t.line})
			}
			for _, n := range names {
				declare(n)
			}
			i = j
		case t.kind == 'k' && t.text == "function":
			params, j, err := funcParams(toks, i+1)
			if err != nil {
				return s, err
			}
			i = j
			open("function")
			for _, p := range params {
				declare(p)
			}
		case t.kind == 'k' && t.text == "for":
			var names []string
			j := i + 1
			for at(j).kind == 'n' {
				names = append(names, at(j).text)
				if at(j+1).text != "," {
					break
				}
				j += 2
			}
			pending = names
			i = j
		case t.kind == 'k' && (t.text == "do" || t.text == "then" || t.text == "repeat"):
			open(t.text)
			for _, p := range pending {
				declare(p)
			}
			pending = nil
		case t.kind == 'k' && (t.text == "else" || t.text == "elseif"):
			if err := closeBlock(t.line); err != nil {
				return s, err
			}
			if t.text == "else" {
				open("else")
			}
		case t.kind == 'k' && (t.text == "end" || t.text == "until"):
			if err := closeBlock(t.line); err != nil {
				return s, err
			}
		case t.kind == 'p' && (t.text == "(" || t.text == "[" || t.text == "{"):
			if t.text == "[" && at(i-1).kind == 'n' && (at(i-1).text == "KEYS" || at(i-1).text == "ARGV") &&
				at(i-2).text != "." && at(i-2).text != ":" {
				s.indexed = append(s.indexed, t.line)
			}
			brackets = append(brackets, t.text)
		case t.kind == 'p' && (t.text == ")" || t.text == "]" || t.text == "}"):
			if len(brackets) == 0 {
				return s, fmt.Errorf("line %d: unbalanced %s", t.line, t.text)
			}
			brackets = brackets[:len(brackets)-1]
		case t.kind == 'n':
			prev := at(i - 1)
			if prev.text == "." || prev.text == ":" {
				continue // a field
			}
			if at(i+1).text == "=" && len(brackets) > 0 && brackets[len(brackets)-1] == "{" &&
				(prev.text == "{" || prev.text == "," || prev.text == ";") {
				continue // a table constructor's key
			}
			if !declared(t.text) {
				if _, ok := s.free[t.text]; !ok {
					s.free[t.text] = t.line
				}
			}
		}
	}
	if len(blocks) > 0 {
		return s, fmt.Errorf("%d blocks not closed", len(blocks))
	}
	return s, nil
}

// funcParams reads a function's parameter list, which starts with the "("
// at toks[i], and returns the parameters and the index of its ")".
func funcParams(toks []luaTok, i int) ([]string, int, error) {
	if i >= len(toks) || toks[i].text != "(" {
		return nil, 0, fmt.Errorf("a function without its parameters")
	}
	var params []string
	for i++; i < len(toks) && toks[i].text != ")"; i++ {
		if toks[i].kind == 'n' {
			params = append(params, toks[i].text)
		}
	}
	if i >= len(toks) {
		return nil, 0, fmt.Errorf("unclosed parameter list")
	}
	return params, i, nil
}
