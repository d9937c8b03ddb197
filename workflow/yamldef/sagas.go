package yamldef

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/cairnhq/cairn/workflow"
)

// This file is the loader's part of compensations and step groups (sagas):
// a workflow's on_failure and groups, a step's group and compensate (see
// workflow.Definition.OnFailure, workflow.Group, workflow.Step.Compensate).

// The keys of a group's mapping and of a compensation's.
var (
	groupKeys      = []string{"optional"}
	compensateKeys = []string{"type", "description", "retry", "timeout", "timeouts", "max_crashes", "circuit_breaker",
		"allowed_hosts", "with"}
)

// notInCompensation are the keys of a step that a compensation cannot have,
// and why.
var notInCompensation = map[string]string{
	"name":           "it is named after its step (compensate:STEP)",
	"optional":       "an operator may retry a compensation that failed, never skip it",
	"group":          "it belongs to its step's group",
	"compensate":     "a compensation has no compensation of its own",
	"max_iterations": "a compensation is not held to an iteration ceiling (it undoes what the run did)",
}

// groupNameError returns why g is not a valid group name, by the workflow
// package's rules, or "".
func groupNameError(g string) string {
	d := workflow.Definition{Name: "w", Steps: []workflow.Step{{Name: "s", Run: stubStep, Group: g}}}
	if err := d.Validate(); err != nil {
		// Drop the "invalid workflow definition "w": step "s": " prefix.
		msg := strings.TrimPrefix(err.Error(), fmt.Sprintf("%v %q: ", workflow.ErrInvalidDefinition, "w"))
		return strings.TrimPrefix(msg, `step "s": `)
	}
	return ""
}

// parseOnFailure parses a workflow's on_failure: stop or compensate.
func (p *parser) parseOnFailure(n *yaml.Node, what string) workflow.FailureAction {
	s, ok := p.scalar(n, what)
	if !ok {
		return ""
	}
	switch a := workflow.FailureAction(s); a {
	case workflow.FailureStop, workflow.FailureCompensate:
		return a
	}
	hint := ""
	if s == string(workflow.OnFailureBlock) || s == string(workflow.OnFailureRelease) {
		hint = fmt.Sprintf(" (%s is a value of ordering.on_failure, what a failed run does to its ordering key)", s)
	}
	p.errorf(n, "%s: %q is not one of %s, %s%s", what, clip(s), workflow.FailureStop, workflow.FailureCompensate, hint)
	return ""
}

// parseGroups parses a workflow's groups mapping: group name -> {optional:
// bool}. It returns the groups and each one's key node.
func (p *parser) parseGroups(n *yaml.Node, what string) (map[string]workflow.Group, map[string]*yaml.Node) {
	m, ok := p.asMapping(n, what)
	if !ok {
		return nil, nil
	}
	groups, keys := map[string]workflow.Group{}, map[string]*yaml.Node{}
	for _, e := range m.entries {
		gwhat := fmt.Sprintf("%s: %q", what, clip(e.name))
		if msg := groupNameError(e.name); msg != "" {
			p.errorf(e.key, "%s: %s", what, msg)
			continue
		}
		gm, ok := p.asMapping(e.val, gwhat)
		if !ok {
			continue
		}
		p.unknown(gm, gwhat, groupKeys...)
		var g workflow.Group
		if v := gm.get("optional"); v != nil {
			g.Optional, _ = p.boolean(v, gwhat+": optional")
		}
		groups[e.name], keys[e.name] = g, e.key
	}
	if len(groups) == 0 {
		return nil, keys
	}
	return groups, keys
}

// groupPlaces checks, step after step, that each group's steps follow one
// another.
type groupPlaces struct {
	what  string         // the workflow, for messages
	steps []placedStep   // by position in the steps list
	last  map[string]int // group -> position of its last step so far
}

// placedStep names a step in messages.
type placedStep struct {
	label string // step "name", or step N when it has no valid name
	line  int
}

// add records the step at the next position: node is its node, st the step
// parsed from it, nodes its name and group nodes. A step of a group whose
// last step so far is not the one just before it is an error, at its
// group's node.
func (p *parser) addPlace(g *groupPlaces, node *yaml.Node, st workflow.Step, nodes stepNodes) {
	i := len(g.steps)
	ps := placedStep{label: fmt.Sprintf("step %d", i+1), line: node.Line}
	if nodes.name != nil {
		ps.label = fmt.Sprintf("step %q", st.Name)
	}
	g.steps = append(g.steps, ps)
	if nodes.group == nil {
		return
	}
	if j, seen := g.last[st.Group]; seen && j != i-1 {
		between, first := g.steps[i-1], g.steps[j]
		p.errorf(nodes.group, "%s: %s: group %q is not contiguous: %s (line %d) comes between it and the group's %s "+
			"(line %d); a group's steps must follow one another", g.what, ps.label, clip(st.Group), between.label,
			between.line, first.label, first.line)
	}
	g.last[st.Group] = i
}

// unused reports the groups configured (groups, their keys' nodes) that no
// step is in.
func (p *parser) unusedGroups(g *groupPlaces, keys map[string]*yaml.Node) {
	for _, name := range slices.Sorted(maps.Keys(keys)) {
		if _, used := g.last[name]; !used {
			p.errorf(keys[name], "%s: groups: %q is configured but no step is in it (a step joins it with group: %s)",
				g.what, clip(name), clip(name))
		}
	}
}

// compensated is what the compensation of a step needs of it.
type compensated struct {
	def   *workflow.Definition
	index int
	// node is the compensate value, key its key.
	node, key *yaml.Node
	// earlier are the steps before it and, when it has a usable name, the
	// step itself (a capped slice shared with other steps' specs); hosts
	// its allowed_hosts (its own, else the workflow's; nil: none); typ its
	// type.
	earlier, hosts []string
	typ            string
	// breaker is the step's own circuit_breaker as written (before it was
	// named), at breakerNode; wfBreaker the workflow's node.
	breaker                *workflow.CircuitBreaker
	breakerNode, wfBreaker *yaml.Node
}

// parseCompensation parses a step's compensate mapping into st.Compensate
// and st.CompensatePolicy. A compensation has the shape of a step (type,
// with, retry, timeout, timeouts.step, max_crashes, circuit_breaker,
// allowed_hosts, description) but no name, optional, group, compensate,
// max_iterations or timeouts.total, and it cannot be an await or a sleep.
// Its templates read the step's earlier steps, the step itself, and
// .compensation; its policy inherits the step's effective one.
func (p *parser) parseCompensation(st *workflow.Step, c compensated, what string) {
	what += ": compensate"
	if c.typ == typeAwait || c.typ == typeSleep {
		p.errorf(c.key, "%s: %s %s step has nothing to undo; only a step with a body can have a compensation",
			what, article(c.typ), c.typ)
		return
	}
	if isNull(c.node) {
		p.errorf(c.key, "%s: empty: want a mapping with type and with, like {type: http, with: {method: ..., url: ...}}", what)
		return
	}
	m, ok := p.asMapping(c.node, what)
	if !ok {
		return
	}
	rest := &mapping{node: m.node, used: map[string]bool{}}
	for _, e := range m.entries {
		if why, bad := notInCompensation[e.name]; bad {
			p.errorf(e.key, "%s: a compensation cannot have %s: %s", what, e.name, why)
			continue
		}
		rest.entries = append(rest.entries, e)
	}
	p.unknown(rest, what, compensateKeys...)
	if v := m.get("description"); v != nil {
		p.scalar(v, what+": description")
	}
	hosts := c.hosts
	if v := m.get("allowed_hosts"); v != nil { // replaces the step's
		hosts = p.allowedHosts(v, what+": allowed_hosts")
	}
	before := len(p.errs)
	var pol workflow.Policy
	polNode := p.parsePolicyKeys(m, &pol, what, true)
	if polNode != nil && len(p.errs) == before {
		eff := pol.Or(st.Policy).Or(c.def.Policy).Or(p.opts.Defaults).Or(workflow.DefaultPolicy())
		if err := forCheck(eff).Validate(); err != nil {
			p.errorf(polNode, "%s: with the step's, the workflow's and the worker's settings: %s", what, policyMsg(err))
		}
	}

	spec := StepSpec{Workflow: c.def.Name, Name: st.Name, Index: c.index, Earlier: c.earlier,
		AllowedHosts: slices.Clone(hosts), Options: p.opts, Compensation: true}
	b := p.parseBody(m, spec, nil, what)
	if !b.built {
		return
	}
	// The breaker in force: the compensation's own, else the step's as
	// written, else the workflow's, else the worker's default. A nameless
	// one is named after the compensation's own target host, which may not
	// be the step's. When that names the very breaker the step has, the
	// compensation just inherits it.
	own := pol.CircuitBreaker
	from := "the step's circuit_breaker"
	if c.breakerNode != nil {
		from += fmt.Sprintf(" (line %d)", c.breakerNode.Line)
	}
	chain := append([]breakerSource{{cb: own}, {cb: c.breaker, from: from}}, p.inheritedBreakers(c.def, c.wfBreaker)...)
	var named *workflow.CircuitBreaker
	if p.nameBreaker(&named, chain, m.get("circuit_breaker"), b, "compensation", what) != "" {
		if cur := st.Policy.CircuitBreaker; own != nil || cur == nil || *cur != *named {
			pol.CircuitBreaker = named
		}
	}
	st.Compensate, st.CompensatePolicy = b.fn, pol
}
