package yamldef

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairnhq/cairn/internal/editdist"

	"go.yaml.in/yaml/v3"
)

// maxAliasDepth bounds alias and merge-key resolution.
const maxAliasDepth = 32

// MaxAliasedNodes bounds how many nodes the aliases of a workflows file
// repeat in all: an alias (*name) counts the nodes of what it names, as if
// it were written out. The loader reads an alias's node each time it
// meets the alias, so without a bound a small file that repeats a large
// workflow through thousands of aliases would take minutes and gigabytes
// to load; with it, aliases add at most about what the largest file
// without them costs. Anchors that share settings (a retry block merged
// into each step, say) stay far below it.
const MaxAliasedNodes = 500_000

// checkAliases reports a file whose aliases repeat more than
// MaxAliasedNodes nodes, at the alias that repeats the most (the first of
// them). Each node of the file is walked once, and once more to size it
// if it is anchored: an anchored node's size, aliases expanded, is kept.
// (The YAML parser bounds the nesting at 10,000 levels.)
func (p *parser) checkAliases(doc *yaml.Node) bool {
	const saturated = 1 << 50 // sizes grow exponentially through nested aliases
	const inProgress = -1
	sizes := map[*yaml.Node]int{} // anchored nodes' sizes
	var size func(n *yaml.Node) int
	size = func(n *yaml.Node) int {
		if n.Kind == yaml.AliasNode {
			n = n.Alias
			if n == nil {
				return 1
			}
		}
		if n.Anchor != "" {
			switch s, ok := sizes[n]; {
			case ok && s == inProgress: // an alias inside what it names: the loader stops at maxAliasDepth
				return 1
			case ok:
				return s
			}
			sizes[n] = inProgress
		}
		s := 1
		for _, c := range n.Content {
			s = min(s+size(c), saturated)
		}
		if n.Anchor != "" {
			sizes[n] = s
		}
		return s
	}
	var (
		repeated int        // nodes the aliases repeat, in all
		worst    *yaml.Node // the alias that repeats the most
		worstN   int
		walk     func(n *yaml.Node)
	)
	walk = func(n *yaml.Node) { // the file as written: each alias adds what it names
		if n.Kind == yaml.AliasNode {
			s := size(n)
			repeated = min(repeated+s, saturated)
			if s > worstN {
				worst, worstN = n, s
			}
			return
		}
		if n.Anchor != "" {
			size(n)
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(doc)
	if repeated <= MaxAliasedNodes {
		return true
	}
	p.errorf(worst, "aliases repeat %d YAML nodes in all, more than %d (*%s here repeats %d): "+
		"write out what they repeat, or repeat less", repeated, MaxAliasedNodes, worst.Value, worstN)
	return false
}

// resolve follows aliases to the node they name.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < maxAliasDepth; i++ {
		n = n.Alias
	}
	return n
}

// isNull reports an absent or null value.
func isNull(n *yaml.Node) bool {
	n = resolve(n)
	return n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

// kindName names a node's kind for messages.
func kindName(n *yaml.Node) string {
	n = resolve(n)
	switch {
	case n == nil:
		return "nothing"
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case n.Kind == yaml.AliasNode:
		return "an alias"
	case n.Tag == "!!null":
		return "null"
	case n.Tag == "!!str":
		return fmt.Sprintf("the string %q", clip(n.Value))
	}
	return strconv.Quote(clip(n.Value))
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// entry is one key and value of a mapping.
type entry struct {
	key, val *yaml.Node
	name     string
}

// mapping is a YAML mapping, read key by key; it reports duplicate and
// unknown keys.
type mapping struct {
	node    *yaml.Node
	entries []entry
	used    map[string]bool
}

// asMapping returns n as a mapping; what names it in messages. A null
// value is an empty mapping.
func (p *parser) asMapping(n *yaml.Node, what string) (*mapping, bool) {
	orig := n
	n = resolve(n)
	m := &mapping{node: n, used: map[string]bool{}}
	if isNull(n) {
		if n == nil {
			m.node = orig
		}
		return m, true
	}
	if n.Kind != yaml.MappingNode {
		p.errorf(orig, "%s: want a mapping (key: value), got %s", what, kindName(n))
		return nil, false
	}
	seen := map[string]*yaml.Node{}
	add := func(k, v *yaml.Node, explicit bool) {
		name := k.Value
		if first, dup := seen[name]; dup {
			switch {
			case !explicit:
			case what == "workflows":
				p.errorf(k, "duplicate workflow %q (first at line %d)", name, first.Line)
			default:
				p.errorf(k, "%s: duplicate key %q (first at line %d)", what, name, first.Line)
			}
			return
		}
		seen[name] = k
		m.entries = append(m.entries, entry{key: k, val: v, name: name})
	}
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), n.Content[i+1]
		if k == nil || k.Kind != yaml.ScalarNode {
			p.errorf(n.Content[i], "%s: keys must be plain names, got %s", what, kindName(k))
			continue
		}
		if k.Tag == "!!merge" {
			merges = append(merges, v)
			continue
		}
		add(k, v, true)
	}
	// Merged keys (<<: *anchor) come after explicit ones, which win; the
	// first merged mapping wins over later ones. Each node is merged once:
	// aliases can form cycles, and repeat a node many times over.
	merged := map[*yaml.Node]bool{}
	var merge func(v *yaml.Node, depth int)
	merge = func(v *yaml.Node, depth int) {
		orig := v
		v = resolve(v)
		if depth > maxAliasDepth || v == nil {
			p.errorf(orig, "%s: merge nested too deeply", what)
			return
		}
		if merged[v] {
			return
		}
		merged[v] = true
		switch v.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(v.Content); i += 2 {
				k := resolve(v.Content[i])
				if k == nil || k.Kind != yaml.ScalarNode {
					continue
				}
				if k.Tag == "!!merge" {
					merge(v.Content[i+1], depth+1)
					continue
				}
				add(k, v.Content[i+1], false)
			}
		case yaml.SequenceNode:
			for _, c := range v.Content {
				merge(c, depth+1)
			}
		default:
			p.errorf(orig, "%s: << must merge a mapping, got %s", what, kindName(v))
		}
	}
	for _, v := range merges {
		merge(v, 0)
	}
	return m, true
}

// get returns the value of key, or nil.
func (m *mapping) get(key string) *yaml.Node {
	m.used[key] = true
	for _, e := range m.entries {
		if e.name == key {
			return e.val
		}
	}
	return nil
}

// keyNode returns the key node of key, or the mapping's node.
func (m *mapping) keyNode(key string) *yaml.Node {
	for _, e := range m.entries {
		if e.name == key {
			return e.key
		}
	}
	return m.node
}

// unknown reports the keys that are not in allowed.
func (p *parser) unknown(m *mapping, what string, allowed ...string) {
	p.unknownWhy(m, what, "", allowed...)
}

// unknownWhy reports the keys that are not in allowed, each with why
// after the list of allowed keys, if why is not "".
func (p *parser) unknownWhy(m *mapping, what, why string, allowed ...string) {
	for _, e := range m.entries {
		if slices.Contains(allowed, e.name) {
			continue
		}
		msg := fmt.Sprintf("%s: unknown key %q", what, e.name)
		switch s := suggest(e.name, allowed); {
		case s != "" && why == "":
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		case s != "":
			msg += fmt.Sprintf(" (did you mean %q? %s)", s, why)
		case why == "":
			msg += " (want " + strings.Join(allowed, ", ") + ")"
		default:
			msg += " (want " + strings.Join(allowed, ", ") + "; " + why + ")"
		}
		p.errorf(e.key, "%s", msg)
	}
}

// suggest returns the allowed key closest to s, if it is close.
func suggest(s string, allowed []string) string {
	best, bestD := "", 3
	for _, a := range allowed {
		if d := editdist.Distance(strings.ToLower(s), a); d < bestD {
			best, bestD = a, d
		}
	}
	return best
}

// scalar returns n's text: any scalar but null (a number or a boolean is
// taken as written); anything else is an error.
func (p *parser) scalar(n *yaml.Node, what string) (string, bool) {
	r := resolve(n)
	if r == nil || r.Kind != yaml.ScalarNode || r.Tag == "!!null" {
		p.errorf(n, "%s: want a value, got %s", what, kindName(r))
		return "", false
	}
	return r.Value, true
}

// enum returns a string that is one of allowed.
func (p *parser) enum(n *yaml.Node, what string, allowed ...string) (string, bool) { //nolint:unparam // the signature of the other accessors (scalar, boolean), whose callers use ok
	s, ok := p.scalar(n, what)
	if !ok {
		return "", false
	}
	if !slices.Contains(allowed, s) {
		p.errorf(n, "%s: %q is not one of %s", what, s, strings.Join(allowed, ", "))
		return "", false
	}
	return s, true
}

// positiveInt returns an integer of at least 1.
func (p *parser) positiveInt(n *yaml.Node, what string) (int, bool) { //nolint:unparam // the signature of the other accessors (scalar, boolean), whose callers use ok
	r := resolve(n)
	if r == nil || r.Kind != yaml.ScalarNode || r.Tag != "!!int" {
		p.errorf(n, "%s: want a whole number, got %s", what, kindName(r))
		return 0, false
	}
	var v int64
	if err := r.Decode(&v); err != nil || v > math.MaxInt32 {
		p.errorf(n, "%s: %q is not a whole number in range", what, r.Value)
		return 0, false
	}
	if v < 1 {
		p.errorf(n, "%s: %d: want at least 1", what, v)
		return 0, false
	}
	return int(v), true
}

// multiplier returns a finite number of at least 1.
func (p *parser) multiplier(n *yaml.Node, what string) (float64, bool) {
	r := resolve(n)
	if r == nil || r.Kind != yaml.ScalarNode || (r.Tag != "!!int" && r.Tag != "!!float") {
		p.errorf(n, "%s: want a number, got %s", what, kindName(r))
		return 0, false
	}
	var v float64
	if err := r.Decode(&v); err != nil {
		p.errorf(n, "%s: %q is not a number", what, r.Value)
		return 0, false
	}
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 1 {
		p.errorf(n, "%s: %s: want a number of at least 1", what, r.Value)
		return 0, false
	}
	return v, true
}

// duration returns a positive Go duration.
func (p *parser) duration(n *yaml.Node, what string) (time.Duration, bool) {
	r := resolve(n)
	if r == nil || r.Kind != yaml.ScalarNode || r.Tag == "!!null" {
		p.errorf(n, "%s: want a duration like 500ms, 30s or 2m, got %s", what, kindName(r))
		return 0, false
	}
	if r.Tag == "!!int" || r.Tag == "!!float" {
		p.errorf(n, "%s: %s has no unit: want a duration like 500ms, 30s or 2m", what, r.Value)
		return 0, false
	}
	d, err := time.ParseDuration(r.Value)
	if err != nil {
		p.errorf(n, "%s: %q is not a duration (want one like 500ms, 30s, 2m or 1h30m)", what, clip(r.Value))
		return 0, false
	}
	if d <= 0 {
		p.errorf(n, "%s: %s: want a positive duration", what, r.Value)
		return 0, false
	}
	return d, true
}

// boolean returns true or false.
func (p *parser) boolean(n *yaml.Node, what string) (bool, bool) {
	r := resolve(n)
	if r == nil || r.Kind != yaml.ScalarNode || r.Tag != "!!bool" {
		p.errorf(n, "%s: want true or false, got %s", what, kindName(r))
		return false, false
	}
	var v bool
	if err := r.Decode(&v); err != nil {
		p.errorf(n, "%s: want true or false, got %q", what, r.Value)
		return false, false
	}
	return v, true
}

// stringList returns a list of non-empty, distinct strings; [] is an empty,
// non-nil list.
func (p *parser) stringList(n *yaml.Node, what string) ([]string, bool) {
	r := resolve(n)
	if r == nil || r.Kind != yaml.SequenceNode {
		p.errorf(n, "%s: want a list like [a, b], got %s", what, kindName(r))
		return nil, false
	}
	out := make([]string, 0, len(r.Content))
	ok := true
	for _, c := range r.Content {
		s, good := p.scalar(c, what)
		switch {
		case !good:
			ok = false
		case s == "":
			p.errorf(c, "%s: empty code", what)
			ok = false
		case slices.Contains(out, s):
			p.errorf(c, "%s: %q is listed twice", what, s)
			ok = false
		default:
			out = append(out, s)
		}
	}
	return out, ok
}
