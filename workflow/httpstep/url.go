package httpstep

import (
	"fmt"
	"net/url"
	"strings"
	"text/template/parse"

	"github.com/cairnhq/cairn/workflow"
)

// The positions of a URL an action can render into, as a set of bits.
type urlState uint8

const (
	stScheme    urlState = 1 << iota // before "://": the scheme
	stColon                          // after the scheme's ":"
	stSlash                          // after "x:/"
	stAuthority                      // userinfo@host:port
	stPath
	stQuery
	stFragment
	stRaw // after an unescaped action: anything
)

const (
	beforeAuthority = stScheme | stColon | stSlash
	afterAuthority  = stPath | stQuery | stFragment
)

// next returns the states the text moves the states s to.
func (s urlState) next(text []byte) urlState {
	var out urlState
	for b := urlState(1); b != 0; b <<= 1 {
		if s&b != 0 {
			out |= scanOne(b, text)
		}
	}
	return out
}

// scanOne returns the state one state st is in after text.
func scanOne(st urlState, text []byte) urlState {
	for _, c := range text {
		switch st {
		case stScheme:
			if c == ':' {
				st = stColon
			}
		case stColon:
			st = stScheme
			if c == '/' {
				st = stSlash
			}
		case stSlash:
			st = stScheme
			if c == '/' {
				st = stAuthority
			}
		case stAuthority:
			switch c {
			case '/':
				st = stPath
			case '?':
				st = stQuery
			case '#':
				st = stFragment
			}
		case stPath:
			switch c {
			case '?':
				st = stQuery
			case '#':
				st = stFragment
			}
		case stQuery:
			if c == '#' {
				st = stFragment
			}
		default: // stFragment and stRaw last to the end
		}
	}
	return st
}

// The functions added at the end of a URL template's actions (see
// prepareURL). They are registered on URL templates after parsing, so a
// template cannot call them itself.
const (
	fnEscapePath  = "cairnEscapePath"
	fnEscapeQuery = "cairnEscapeQuery"
	fnCheckHost   = "cairnCheckHost"
)

// urlTemplate is what prepareURL finds in a URL template.
type urlTemplate struct {
	// hostTemplated: an action renders into the scheme, userinfo, host or
	// port, or the literal text at the start of the template does not
	// fix them; hostAction is the first such action, for messages.
	hostTemplated bool
	hostAction    string
	// origin is the scheme, userinfo and host the literal text fixes,
	// when the URL is not host-templated.
	origin *url.URL
}

// prepareURL analyses the parse tree of a URL template that is not
// constant and adds an escaping function at the end of each action that
// prints, for the part of the URL it renders into:
//
//   - a path segment or the fragment: every byte but A-Z a-z 0-9 - . _ ~ is
//     percent-encoded (so "/", "?", "#", "@", "%" and "\" cannot change the
//     URL's structure);
//   - a query (key or value): url.QueryEscape;
//   - the authority (host-templated URLs only): the value must be a host
//     name, an IP address or a port, or the template fails to render;
//   - the scheme, or after such an action: nothing (host-templated URLs
//     only; the rendered URL's host is checked against the allowed hosts).
//
// An action that could land in more than one of path, query and fragment
// (after an {{if}}, say) gets the path escaping, which is correct in all
// three. An action whose pipeline ends with urlquery is already escaped
// for all three and is left alone.
//
// The literal text before the first action must fix scheme://host[:port]
// and end it with "/", "?" or "#"; otherwise the template is
// host-templated, as it is when any action renders into the authority.
func prepareURL(t *Template) (urlTemplate, error) {
	var ut urlTemplate
	root := t.t.Root
	var prefix strings.Builder
	for _, n := range root.Nodes {
		tn, ok := n.(*parse.TextNode)
		if !ok {
			break
		}
		prefix.Write(tn.Text)
	}
	lit := prefix.String()
	if stScheme.next([]byte(lit))&^afterAuthority != 0 {
		ut.hostTemplated = true
		for _, n := range root.Nodes {
			if n.Type() != parse.NodeText {
				ut.hostAction = n.String()
				break
			}
		}
	} else {
		origin, err := literalOrigin(lit)
		if err != nil {
			return ut, err
		}
		ut.origin = origin
	}

	a := &analysis{states: map[*parse.ActionNode]urlState{}}
	a.list(root, stScheme)
	t.t.Funcs(escapers)
	// Rewrite in the order of the text, so that hostAction is the first.
	walk(root, true, func(n parse.Node, _ bool) {
		act, ok := n.(*parse.ActionNode)
		if !ok {
			return
		}
		s, ok := a.states[act]
		if !ok { // unreachable, or a declaration
			return
		}
		var fn string
		switch {
		case s&(beforeAuthority|stRaw) != 0:
			// Unescaped: the input writes the URL.
		case s&stAuthority != 0:
			fn = fnCheckHost
		case endsWithURLQuery(act.Pipe):
		case s == stQuery:
			fn = fnEscapeQuery
		default:
			fn = fnEscapePath
		}
		if s&(beforeAuthority|stAuthority|stRaw) != 0 {
			if ut.hostAction == "" {
				ut.hostAction = act.String()
			}
			ut.hostTemplated = true
		}
		if fn != "" {
			act.Pipe.Cmds = append(act.Pipe.Cmds, &parse.CommandNode{NodeType: parse.NodeCommand,
				Pos: act.Pos, Args: []parse.Node{parse.NewIdentifier(fn).SetPos(act.Pos)}})
		}
	})
	return ut, nil
}

// literalOrigin parses the scheme and authority at the start of text, which
// ends them.
func literalOrigin(text string) (*url.URL, error) {
	text = strings.TrimLeft(text, " \t\r\n")
	// The text reaches the path, query or fragment: it has "://" and one
	// of / ? # after it.
	i := strings.Index(text, "://") + 3
	end := i + strings.IndexAny(text[i:], "/?#")
	u, err := checkURL(text[:end] + "/")
	if err != nil {
		return nil, err
	}
	u.Path = ""
	return u, nil
}

// endsWithURLQuery reports whether a pipeline's last command calls urlquery.
func endsWithURLQuery(p *parse.PipeNode) bool {
	if p == nil || len(p.Cmds) == 0 {
		return false
	}
	id, ok := p.Cmds[len(p.Cmds)-1].Args[0].(*parse.IdentifierNode)
	return ok && id.Ident == "urlquery"
}

// analysis computes the states each printing action of a URL template can
// render in.
type analysis struct {
	states map[*parse.ActionNode]urlState
	loop   urlState // the states at the {{break}}s and {{continue}}s of the current range
}

func (a *analysis) list(l *parse.ListNode, s urlState) urlState {
	if l == nil {
		return s
	}
	for _, n := range l.Nodes {
		s = a.node(n, s)
	}
	return s
}

func (a *analysis) node(n parse.Node, s urlState) urlState {
	switch n := n.(type) {
	case *parse.TextNode:
		return s.next(n.Text)
	case *parse.ActionNode:
		if len(n.Pipe.Decl) > 0 { // {{$x := ...}} prints nothing
			return s
		}
		a.states[n] |= s
		if s&(beforeAuthority|stRaw) != 0 {
			return s | stRaw
		}
		return s // escaped (or checked): it does not change the state
	case *parse.IfNode:
		return a.branch(&n.BranchNode, s)
	case *parse.WithNode:
		return a.branch(&n.BranchNode, s)
	case *parse.RangeNode:
		outer := a.loop
		a.loop = 0
		start := s
		for {
			end := a.list(n.List, start)
			next := start | end | a.loop
			if next == start {
				break
			}
			start = next
		}
		out := start
		if n.ElseList != nil {
			out |= a.list(n.ElseList, s)
		}
		a.loop = outer
		return out
	case *parse.BreakNode, *parse.ContinueNode:
		a.loop |= s
		return s
	}
	return s
}

func (a *analysis) branch(b *parse.BranchNode, s urlState) urlState {
	out := a.list(b.List, s)
	if b.ElseList != nil {
		return out | a.list(b.ElseList, s)
	}
	return out | s
}

// escapers are the functions prepareURL adds.
var escapers = map[string]any{
	fnEscapePath:  func(v any) string { return escapeSegment(printed(v)) },
	fnEscapeQuery: func(v any) string { return url.QueryEscape(printed(v)) },
	fnCheckHost:   checkHostValue,
}

// printed is what text/template prints for v.
func printed(v any) string {
	if v == nil {
		return "<no value>"
	}
	return fmt.Sprint(v)
}

// escapeSegment percent-encodes every byte of s but the unreserved
// characters of RFC 3986 (A-Z a-z 0-9 - . _ ~).
func escapeSegment(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := range len(s) {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// errHostValue is the error of a value rendered into a URL's authority that
// is not (part of) a host name, an IP address or a port.
type errHostValue struct{ what string }

func (e *errHostValue) Error() string {
	return "a value rendered into the host " + e.what + "; want a host name, an IP address or a port"
}

// checkHostValue returns v's text if it can only be (part of) a host name,
// an IP address in brackets or a port: letters, digits and . - _ : [ ].
// Anything else (/ ? # @ % \, spaces, non-ASCII) could change what the
// URL's authority is; the host itself is checked against the allowed hosts
// once the URL is rendered.
func checkHostValue(v any) (string, error) {
	s := printed(v)
	for i := range len(s) {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte(".-_:[]", c) >= 0 {
			continue
		}
		if c < 0x20 || c >= 0x7f {
			return "", &errHostValue{fmt.Sprintf("contains the byte 0x%02x", c)}
		}
		return "", &errHostValue{fmt.Sprintf("contains %q", c)}
	}
	return s, nil
}

// checkPath refuses a path with a "." or ".." segment (also percent-encoded):
// a rendered value must not climb out of the path the definition gives.
func checkPath(u *url.URL) error {
	for seg := range strings.SplitSeq(u.EscapedPath(), "/") {
		if len(seg) > 6 || !strings.Contains(seg, ".") && !strings.Contains(seg, "%") {
			continue
		}
		if d, err := url.PathUnescape(seg); err == nil && (d == "." || d == "..") {
			return fmt.Errorf("the path of %s has a %q segment", redactURL(u), d)
		}
	}
	return nil
}

// checkRenderedURL parses a rendered URL and checks where it goes. A
// host-templated URL must have no userinfo and go to an allowed host; any
// other must go to the scheme, userinfo and host of the definition's text
// (which the escaping guarantees). A templated URL must have no "." or ".."
// path segment.
func (s *Step) checkRenderedURL(raw string) (*url.URL, error) {
	u, err := checkURL(raw)
	if err != nil {
		return nil, workflow.WithCode(workflow.Permanent(fmt.Errorf("url: %w", err)), CodeInvalidURL)
	}
	if s.urlConstant {
		return u, nil
	}
	if err := checkPath(u); err != nil {
		return nil, workflow.WithCode(workflow.Permanent(fmt.Errorf("url: %w", err)), CodeInvalidURL)
	}
	notAllowed := func(format string, args ...any) error {
		return workflow.WithCode(workflow.Permanent(fmt.Errorf("url: "+format, args...)), CodeHostNotAllowed)
	}
	if !s.urlInfo.hostTemplated {
		if o := s.urlInfo.origin; u.Scheme != o.Scheme || u.Host != o.Host || u.User.String() != o.User.String() {
			return nil, notAllowed("%s does not go to the definition's %s", redactURL(u), redactURL(o))
		}
		return u, nil
	}
	if u.User != nil {
		return nil, notAllowed("%s: userinfo (user@) is not allowed in a host-templated URL", redactURL(u))
	}
	e, err := endpointOf(u)
	if err != nil {
		return nil, notAllowed("%s: %v", redactURL(u), err)
	}
	if !s.allowed.allows(e) {
		return nil, notAllowed("host %s is not in allowed_hosts (%s)", e, s.allowed)
	}
	return u, nil
}
