package yamldef

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/cairnhq/cairn/workflow"
	"github.com/cairnhq/cairn/workflow/httpstep"
)

// The keys each mapping allows.
var (
	workflowKeys = []string{"description", "resiliency", "allowed_hosts", "ordering", "max_running", "on_failure",
		"groups", "execution", "steps"}
	orderingKeys   = []string{"concurrency", "on_failure"}
	resiliencyKeys = []string{"retry", "timeouts", "max_iterations", "max_crashes", "circuit_breaker", "checkpoint"}
	breakerKeys    = []string{"name", "failure_threshold", "window", "cooldown", "max_cooldown"}
	checkpointKeys = []string{"enabled", "interval"}
	retryKeys      = []string{"max_attempts", "backoff", "initial_delay", "multiplier", "max_delay", "jitter",
		"unknown_errors", "non_retryable_codes"}
	timeoutKeys = []string{"step", "total"}
	stepKeys    = []string{"name", "type", "description", "optional", "retry", "timeout", "timeouts", "max_iterations",
		"max_crashes", "circuit_breaker", "allowed_hosts", "group", "compensate", "with"}
	httpKeys = []string{"method", "url", "headers", "body", "poll"}
	pollKeys = []string{"until", "interval"}
)

// stubStep stands in for a step body when names are checked with the
// workflow package's own rules.
func stubStep(context.Context, *workflow.StepContext) (any, error) { return nil, nil }

// nameError returns why workflowName or stepName is not a valid name, by
// the workflow package's rules, or "".
func nameError(workflowName, stepName string) string {
	d := workflow.Definition{Name: workflowName, Steps: []workflow.Step{{Name: stepName, Run: stubStep}}}
	if err := d.Validate(); err != nil {
		// Drop the "invalid workflow definition "x": [step 0: ]" prefix.
		msg := strings.TrimPrefix(err.Error(), fmt.Sprintf("%v %q: ", workflow.ErrInvalidDefinition, workflowName))
		return strings.TrimPrefix(msg, "step 0: ")
	}
	return ""
}

// parseWorkflow parses one workflow; nil when it has errors.
func (p *parser) parseWorkflow(e entry) *workflow.Definition {
	before := len(p.errs)
	name := e.name
	what := fmt.Sprintf("workflow %q", name)
	if msg := nameError(name, "s"); msg != "" {
		p.errorf(e.key, "%s: %s", what, msg)
	}
	m, ok := p.asMapping(e.val, what)
	if !ok {
		return nil
	}
	p.unknown(m, what, workflowKeys...)
	if n := m.get("description"); n != nil {
		p.scalar(n, what+": description")
	}
	def := &workflow.Definition{Name: name}
	wfBreaker := p.parseWorkflowResiliency(m, def, what, before) // the workflow's circuit_breaker
	p.parseWorkflowRuns(m, def, what)
	var groupNodes map[string]*yaml.Node // the groups' keys
	if n := m.get("groups"); n != nil {
		def.Groups, groupNodes = p.parseGroups(n, what+": groups")
	}

	var hosts []string // nil: not set
	if n := m.get("allowed_hosts"); n != nil {
		hosts = p.allowedHosts(n, what+": allowed_hosts")
	}

	seq := p.stepsList(e, m, what)
	if seq == nil {
		return nil
	}
	p.parseSteps(def, seq, hosts, wfBreaker, groupNodes, what)
	if len(p.errs) > before {
		return nil
	}
	return p.finishWorkflow(e, def, what)
}

// parseWorkflowResiliency parses the workflow's resiliency, if any, into
// def.Policy and returns its circuit_breaker node (nil for none). When
// the workflow has no error so far (p.errs has its length before), the
// policy is also checked with the worker's defaults under it.
func (p *parser) parseWorkflowResiliency(m *mapping, def *workflow.Definition, what string, before int) *yaml.Node {
	n := m.get("resiliency")
	if n == nil {
		return nil
	}
	var wfBreaker *yaml.Node
	def.Policy, wfBreaker = p.parseResiliency(n, what+": resiliency")
	if len(p.errs) == before {
		if err := forCheck(def.Policy.Or(p.opts.Defaults).Or(workflow.DefaultPolicy())).Validate(); err != nil {
			p.errorf(n, "%s: resiliency: with the worker's defaults: %v", what, policyMsg(err))
		}
	}
	return wfBreaker
}

// parseWorkflowRuns parses how the workflow's runs go into def: ordering,
// max_running, execution and on_failure.
func (p *parser) parseWorkflowRuns(m *mapping, def *workflow.Definition, what string) {
	if n := m.get("ordering"); n != nil {
		def.Ordering = p.parseOrdering(n, what+": ordering")
	}
	if n := m.get("max_running"); n != nil {
		def.MaxRunning, _ = p.positiveInt(n, what+": max_running")
		if def.MaxRunning > workflow.MaxRunningLimit {
			p.errorf(n, "%s: max_running: %d is more than %d", what, def.MaxRunning, workflow.MaxRunningLimit)
		}
	}

	// execution: strict (the default: one asynq task per step attempt) or
	// inline (Definition.Inline).
	if n := m.get("execution"); n != nil {
		if s, ok := p.scalar(n, what+": execution"); ok {
			switch s {
			case "strict":
			case "inline":
				def.Inline = true
			default:
				p.errorf(n, "%s: execution: %q is not one of strict, inline", what, clip(s))
			}
		}
	}

	// on_failure is the workflow's; ordering.on_failure is what a failed
	// run of an ordering key does to the key.
	if n := m.get("on_failure"); n != nil {
		def.OnFailure = p.parseOnFailure(n, what+": on_failure")
	}
}

// stepsList returns the workflow's list of steps, or nil (with an error)
// when it is missing, not a list, empty or too long.
func (p *parser) stepsList(e entry, m *mapping, what string) *yaml.Node {
	stepsNode := m.get("steps")
	if stepsNode == nil {
		p.errorf(e.key, "%s: missing key steps", what)
		return nil
	}
	seq := resolve(stepsNode)
	if seq == nil || seq.Kind != yaml.SequenceNode {
		p.errorf(stepsNode, "%s: steps: want a list of steps (- name: ...), got %s", what, kindName(seq))
		return nil
	}
	if len(seq.Content) == 0 {
		p.errorf(stepsNode, "%s: steps: no steps", what)
		return nil
	}
	// Too many steps is refused before any is parsed: the work is linear
	// in the steps, and a file of many thousands would be parsed in full
	// only to be refused at the end (Definition.Validate says the same).
	if n := len(seq.Content); n > workflow.MaxSteps {
		p.errorf(m.keyNode("steps"), "%s: steps: %d steps; at most %d", what, n, workflow.MaxSteps)
		return nil
	}
	return seq
}

// parseSteps parses the steps of list seq into def.Steps (those without
// error), with the workflow's allowed hosts and circuit breaker, and
// checks the places of its groups (groupNodes: the groups' keys).
func (p *parser) parseSteps(def *workflow.Definition, seq *yaml.Node, hosts []string, wfBreaker *yaml.Node,
	groupNodes map[string]*yaml.Node, what string,
) {
	names := &stepNames{seen: map[string]*yaml.Node{}}
	places := &groupPlaces{what: what, last: map[string]int{}}
	for i, sn := range seq.Content {
		st, nodes, ok := p.parseStep(def, i, sn, names, hosts, wfBreaker)
		p.addPlace(places, sn, st, nodes)
		if ok {
			def.Steps = append(def.Steps, st)
		}
	}
	p.unusedGroups(places, groupNodes)
}

// finishWorkflow returns a workflow parsed without error, once its own
// nameless circuit breaker is dropped and Definition.Validate accepts it.
func (p *parser) finishWorkflow(e entry, def *workflow.Definition, what string) *workflow.Definition {
	// Each step the workflow's nameless breaker applies to now has its own,
	// named after its host (nameBreaker); the waits, which no breaker holds
	// back, have none.
	if cb := def.Policy.CircuitBreaker; cb != nil && cb.Name == "" {
		def.Policy.CircuitBreaker = nil
	}
	// Everything above mirrors Definition.Validate; anything it still
	// finds is reported at the workflow's name.
	if err := def.Validate(); err != nil {
		p.errorf(e.key, "%s: %v", what, err)
		return nil
	}
	return def
}

// parseOrdering parses a workflow's ordering mapping: how runs started with
// an ordering key are admitted.
func (p *parser) parseOrdering(n *yaml.Node, what string) *workflow.Ordering {
	o := &workflow.Ordering{}
	m, ok := p.asMapping(n, what)
	if !ok {
		return o
	}
	p.unknown(m, what, orderingKeys...)
	if v := m.get("concurrency"); v != nil {
		o.Concurrency, _ = p.positiveInt(v, what+".concurrency")
		if o.Concurrency > workflow.MaxOrderingConcurrency {
			p.errorf(v, "%s.concurrency: %d is more than %d", what, o.Concurrency, workflow.MaxOrderingConcurrency)
		}
	}
	if v := m.get("on_failure"); v != nil {
		s, _ := p.enum(v, what+".on_failure", string(workflow.OnFailureBlock), string(workflow.OnFailureRelease))
		o.OnFailure = workflow.OnFailure(s)
	}
	return o
}

// parseBreaker parses a circuit_breaker mapping. Without a name, the
// breaker of an http step is named after its target host (nameBreaker).
func (p *parser) parseBreaker(n *yaml.Node, what string) *workflow.CircuitBreaker {
	cb := &workflow.CircuitBreaker{}
	m, ok := p.asMapping(n, what)
	if !ok {
		return cb
	}
	p.unknown(m, what, breakerKeys...)
	if v := m.get("name"); v != nil {
		if cb.Name, _ = p.scalar(v, what+".name"); cb.Name == "" && !isNull(v) {
			p.errorf(v, "%s.name: empty (leave the key out to name an http step's breaker after its target host)", what)
		}
	}
	if v := m.get("failure_threshold"); v != nil {
		cb.FailureThreshold, _ = p.positiveInt(v, what+".failure_threshold")
	}
	if v := m.get("window"); v != nil {
		cb.Window, _ = p.duration(v, what+".window")
	}
	if v := m.get("cooldown"); v != nil {
		cb.Cooldown, _ = p.duration(v, what+".cooldown")
	}
	if v := m.get("max_cooldown"); v != nil {
		cb.MaxCooldown, _ = p.duration(v, what+".max_cooldown")
	}
	return cb
}

// policyMsg is a policy error without its "invalid policy: " prefixes.
func policyMsg(err error) string {
	return strings.ReplaceAll(strings.ReplaceAll(err.Error(), workflow.ErrInvalidPolicy.Error()+": ", ""), "\n", "; ")
}

// parseResiliency parses a workflow's resiliency mapping. It returns its
// circuit_breaker's node too (nil: none).
func (p *parser) parseResiliency(n *yaml.Node, what string) (workflow.Policy, *yaml.Node) {
	var pol workflow.Policy
	m, ok := p.asMapping(n, what)
	if !ok {
		return pol, nil
	}
	p.unknown(m, what, resiliencyKeys...)
	if r := m.get("retry"); r != nil {
		p.parseRetry(r, &pol, what+".retry")
	}
	if t := m.get("timeouts"); t != nil {
		if tm, ok := p.asMapping(t, what+".timeouts"); ok {
			p.unknown(tm, what+".timeouts", timeoutKeys...)
			if v := tm.get("step"); v != nil {
				pol.StepTimeout, _ = p.duration(v, what+".timeouts.step")
			}
			if v := tm.get("total"); v != nil {
				pol.RunTimeout, _ = p.duration(v, what+".timeouts.total")
			}
		}
	}
	if v := m.get("max_iterations"); v != nil {
		pol.MaxIterations, _ = p.positiveInt(v, what+".max_iterations")
	}
	if v := m.get("max_crashes"); v != nil {
		pol.MaxCrashes, _ = p.positiveInt(v, what+".max_crashes")
	}
	cbNode := m.get("circuit_breaker")
	if cbNode != nil {
		pol.CircuitBreaker = p.parseBreaker(cbNode, what+".circuit_breaker")
	}
	if v := m.get("checkpoint"); v != nil {
		p.parseCheckpoint(v, what+".checkpoint")
	}
	return pol, cbNode
}

// alwaysCheckpoints says why checkpoint settings other than the defaults
// are refused.
const alwaysCheckpoints = "Cairn always checkpoints after every step; it cannot be disabled or made less frequent"

// parseCheckpoint checks a checkpoint mapping. Cairn checkpoints after each
// step, always: the mapping may only say so, {enabled: true, interval:
// after_each_step}, either key left out.
func (p *parser) parseCheckpoint(n *yaml.Node, what string) {
	m, ok := p.asMapping(n, what)
	if !ok {
		return
	}
	p.unknownWhy(m, what, alwaysCheckpoints+", so there is nothing else to set", checkpointKeys...)
	if v := m.get("enabled"); v != nil {
		if on, ok := p.boolean(v, what+".enabled"); ok && !on {
			p.errorf(v, "%s.enabled: false is not supported: %s (remove the key or set it to true)", what, alwaysCheckpoints)
		}
	}
	if v := m.get("interval"); v != nil {
		if s, ok := p.scalar(v, what+".interval"); ok && s != "after_each_step" {
			p.errorf(v, "%s.interval: %q is not supported: %s (remove the key or set it to after_each_step)",
				what, clip(s), alwaysCheckpoints)
		}
	}
}

// allowedHosts parses an allowed_hosts list: entries for
// httpstep.ParseAllowedHost, each once. It returns the entries in
// canonical form; [] is an empty, non-nil list.
func (p *parser) allowedHosts(n *yaml.Node, what string) []string {
	r := resolve(n)
	if r == nil || r.Kind != yaml.SequenceNode {
		p.errorf(n, "%s: want a list of hosts like [api.example.com, \"*.example.com\", \"api.example.com:8443\"], got %s",
			what, kindName(r))
		return []string{}
	}
	out := make([]string, 0, len(r.Content))
	seen := map[string]*yaml.Node{}
	for _, c := range r.Content {
		s, ok := p.scalar(c, what)
		if !ok {
			continue
		}
		h, err := httpstep.ParseAllowedHost(s)
		if err != nil {
			p.errorf(c, "%s: %v", what, err)
			continue
		}
		if first, dup := seen[h]; dup {
			p.errorf(c, "%s: %q is listed twice (first at line %d)", what, h, first.Line)
			continue
		}
		seen[h] = c
		out = append(out, h)
	}
	return out
}

// parseRetry parses a retry mapping into pol.
func (p *parser) parseRetry(n *yaml.Node, pol *workflow.Policy, what string) {
	before := len(p.errs)
	m, ok := p.asMapping(n, what)
	if !ok {
		return
	}
	p.unknown(m, what, retryKeys...)
	if v := m.get("max_attempts"); v != nil {
		pol.MaxAttempts, _ = p.positiveInt(v, what+".max_attempts")
	}
	if v := m.get("backoff"); v != nil {
		s, _ := p.enum(v, what+".backoff", string(workflow.BackoffExponential), string(workflow.BackoffLinear),
			string(workflow.BackoffFixed))
		pol.Backoff = workflow.Backoff(s)
	}
	if v := m.get("initial_delay"); v != nil {
		pol.InitialInterval, _ = p.duration(v, what+".initial_delay")
	}
	if v := m.get("multiplier"); v != nil {
		pol.BackoffCoefficient, _ = p.multiplier(v, what+".multiplier")
	}
	if v := m.get("max_delay"); v != nil {
		pol.MaxInterval, _ = p.duration(v, what+".max_delay")
		if pol.InitialInterval > 0 && pol.MaxInterval > 0 && pol.MaxInterval < pol.InitialInterval {
			p.errorf(v, "%s.max_delay: %s is shorter than initial_delay %s", what, pol.MaxInterval, pol.InitialInterval)
		}
	}
	if v := m.get("jitter"); v != nil {
		s, _ := p.enum(v, what+".jitter", string(workflow.JitterNone), string(workflow.JitterFull),
			string(workflow.JitterEqual))
		pol.Jitter = workflow.Jitter(s)
	}
	if v := m.get("unknown_errors"); v != nil {
		s, _ := p.enum(v, what+".unknown_errors", string(workflow.UnknownTransient), string(workflow.UnknownPermanent))
		pol.UnknownErrors = workflow.ErrorMode(s)
	}
	if v := m.get("non_retryable_codes"); v != nil {
		if codes, ok := p.stringList(v, what+".non_retryable_codes"); ok {
			pol.NonRetryableCodes = codes
		}
	}
	if len(p.errs) == before {
		if err := pol.Validate(); err != nil {
			p.errorf(n, "%s: %s", what, policyMsg(err))
		}
	}
}

// stepNodes are the nodes of a step that its workflow checks further: its
// name's (nil when the step has no usable name) and its group's (nil: no
// usable group).
type stepNodes struct {
	name, group *yaml.Node
}

// stepNames are the names of a workflow's steps parsed so far, in order,
// each once. A step's templates may read the steps before it, a
// compensation's also its own step: each gets a capped prefix of list
// (prefix), not a copy, so that the specs of n steps share n names rather
// than hold n²/2.
type stepNames struct {
	list []string
	seen map[string]*yaml.Node // name: its node
}

// prefix returns the names so far; appending to it copies.
func (s *stepNames) prefix() []string { return slices.Clip(s.list) }

// parseStep parses step i of def; names are the names of the steps before
// it, hosts is the workflow's allowed_hosts (nil: not set), wfBreaker its
// circuit_breaker's node (nil: none). ok is false when the step has no
// usable name, or the name of an earlier step: it is not one of def's
// steps (and its errors are reported).
func (p *parser) parseStep(def *workflow.Definition, i int, n *yaml.Node, names *stepNames, hosts []string,
	wfBreaker *yaml.Node) (st workflow.Step, nodes stepNodes, ok bool) {
	what := fmt.Sprintf("workflow %q: step %d", def.Name, i+1)
	m, isMap := p.asMapping(n, what)
	if !isMap {
		return st, nodes, false
	}
	earlier := names.prefix()
	withSelf := earlier // what a compensation reads
	nameNode := m.get("name")
	if nameNode == nil {
		p.errorf(m.node, "%s: missing key name", what)
	} else if name, isStr := p.scalar(nameNode, what+": name"); isStr {
		if msg := nameError("w", name); msg != "" {
			p.errorf(nameNode, "%s: %s", what, msg)
			nameNode = nil
		} else {
			st.Name = name
			what = fmt.Sprintf("workflow %q: step %q", def.Name, name)
		}
	} else {
		nameNode = nil
	}
	nodes.name = nameNode
	if nameNode != nil {
		if first, dup := names.seen[st.Name]; dup {
			p.errorf(nameNode, "workflow %q: duplicate step name %q (first at line %d)", def.Name, st.Name, first.Line)
		} else {
			names.seen[st.Name] = nameNode
			names.list = append(names.list, st.Name)
			withSelf = names.prefix()
			ok = true
		}
	}
	p.unknown(m, what, stepKeys...)
	if v := m.get("description"); v != nil {
		p.scalar(v, what+": description")
	}
	if v := m.get("optional"); v != nil {
		st.Optional, _ = p.boolean(v, what+": optional")
	}
	if v := m.get("group"); v != nil {
		if g, ok := p.scalar(v, what+": group"); ok {
			if msg := groupNameError(g); msg != "" {
				p.errorf(v, "%s: %s", what, msg)
			} else {
				st.Group, nodes.group = g, v
			}
		}
	}
	// The step's list replaces the workflow's, as its other settings do.
	if v := m.get("allowed_hosts"); v != nil {
		hosts = p.allowedHosts(v, what+": allowed_hosts")
	}
	before := len(p.errs)
	polNode := p.parsePolicyKeys(m, &st.Policy, what, false)
	if polNode != nil && len(p.errs) == before {
		eff := st.Policy.Or(def.Policy).Or(p.opts.Defaults).Or(workflow.DefaultPolicy())
		if err := forCheck(eff).Validate(); err != nil {
			p.errorf(polNode, "%s: with the workflow's and the worker's settings: %s", what, policyMsg(err))
		}
	}

	spec := StepSpec{Workflow: def.Name, Name: st.Name, Index: i, Earlier: earlier,
		AllowedHosts: slices.Clone(hosts), Options: p.opts}
	b := p.parseBody(m, spec, &st, what)
	st.Run = b.fn
	written := st.Policy.CircuitBreaker // before nameBreaker names it
	if b.built {
		chain := append([]breakerSource{{cb: written}}, p.inheritedBreakers(def, wfBreaker)...)
		p.nameBreaker(&st.Policy.CircuitBreaker, chain, m.get("circuit_breaker"), b, "step", what)
	}
	if c := m.get("compensate"); c != nil {
		p.parseCompensation(&st, compensated{def: def, index: i, node: c, key: m.keyNode("compensate"),
			earlier: withSelf, hosts: hosts, typ: b.typ, breaker: written, breakerNode: m.get("circuit_breaker"),
			wfBreaker: wfBreaker}, what)
	}
	return st, nodes, ok
}

// parsePolicyKeys parses the policy keys of a step's mapping m (retry,
// timeout, timeouts, max_iterations, max_crashes, circuit_breaker), or of a
// compensation's (comp: no max_iterations, no timeouts.total), into pol.
// It returns the node of the first of them in the file (nil: none).
func (p *parser) parsePolicyKeys(m *mapping, pol *workflow.Policy, what string, comp bool) *yaml.Node {
	var polNode *yaml.Node
	if v := m.get("retry"); v != nil {
		polNode = v
		p.parseRetry(v, pol, what+": retry")
	}
	if v := m.get("timeout"); v != nil {
		polNode = cmpNode(polNode, v)
		pol.StepTimeout, _ = p.duration(v, what+": timeout")
	}
	if t := m.get("timeouts"); t != nil {
		polNode = cmpNode(polNode, t)
		if tm, ok := p.asMapping(t, what+": timeouts"); ok {
			if comp {
				p.unknownWhy(tm, what+": timeouts", "a compensation has no total: a compensating run has no deadline", "step")
			} else {
				p.unknown(tm, what+": timeouts", timeoutKeys...)
			}
			if v := tm.get("step"); v != nil {
				if m.get("timeout") != nil {
					p.errorf(v, "%s: timeouts.step and timeout both set the step timeout; keep one", what)
				}
				pol.StepTimeout, _ = p.duration(v, what+": timeouts.step")
			}
			// A step's total is the run's deadline while the step is current
			// (the most specific run timeout wins).
			if v := tm.get("total"); v != nil && !comp {
				pol.RunTimeout, _ = p.duration(v, what+": timeouts.total")
			}
		}
	}
	if v := m.get("max_iterations"); v != nil && !comp {
		polNode = cmpNode(polNode, v)
		pol.MaxIterations, _ = p.positiveInt(v, what+": max_iterations")
	}
	if v := m.get("max_crashes"); v != nil {
		polNode = cmpNode(polNode, v)
		pol.MaxCrashes, _ = p.positiveInt(v, what+": max_crashes")
	}
	if v := m.get("circuit_breaker"); v != nil {
		polNode = cmpNode(polNode, v)
		pol.CircuitBreaker = p.parseBreaker(v, what+": circuit_breaker")
	}
	return polNode
}

// body is what parseBody built of a step's or a compensation's type and
// with.
type body struct {
	typ      string
	typeNode *yaml.Node
	fn       workflow.StepFunc
	built    bool           // the body, or a step's wait, was built
	hs       *httpstep.Step // the built-in http step's
	urlNode  *yaml.Node     // its with.url (or what stands for it)
}

// parseBody builds the body of a step (st set: an await or a sleep makes
// st wait instead) or of a compensation (st nil: an await or a sleep is an
// error) from m's type and with; spec is the StepSpec but its With.
func (p *parser) parseBody(m *mapping, spec StepSpec, st *workflow.Step, what string) body {
	var b body
	b.typeNode = m.get("type")
	types := p.stepTypes()
	names := slices.Sorted(maps.Keys(types))
	if st == nil {
		names = slices.DeleteFunc(names, func(t string) bool { return t == typeAwait || t == typeSleep })
	}
	if b.typeNode == nil {
		p.errorf(m.node, "%s: missing key type (want one of %s)", what, strings.Join(names, ", "))
		return b
	}
	var ok bool
	if b.typ, ok = p.scalar(b.typeNode, what+": type"); !ok {
		return b
	}
	if b.typ == typeAwait || b.typ == typeSleep { // no body (waits.go)
		if st == nil {
			p.errorf(b.typeNode, "%s: type: a compensation cannot be %s %s: it must do something to undo the step "+
				"(want one of %s)", what, article(b.typ), b.typ, strings.Join(names, ", "))
			return b
		}
		waitErrs := len(p.errs)
		p.parseWait(st, b.typ, resolve(m.get("with")), b.typeNode, spec.Earlier, what)
		b.built = len(p.errs) == waitErrs
		return b
	}
	build, known := types[b.typ]
	if !known {
		p.errorf(b.typeNode, "%s: unknown step type %q (want one of %s)", what, b.typ, strings.Join(names, ", "))
		return b
	}
	withNode := m.get("with")
	if withNode != nil && isNull(withNode) {
		withNode = nil
	}
	spec.With = resolve(withNode)
	at := withNode
	if at == nil {
		at = b.typeNode
	}
	var err error
	if _, replaced := p.opts.StepTypes[typeHTTP]; b.typ == typeHTTP && !replaced {
		if b.hs, err = httpStep(spec); err == nil {
			b.fn = b.hs.Run
			b.urlNode = withKey(spec.With, "url", at)
		}
	} else {
		b.fn, err = build(spec)
	}
	if err != nil {
		p.stepTypeError(err, at, what)
		return b
	}
	b.built = b.fn != nil
	if !b.built {
		p.errorf(at, "%s: step type %q built no body", what, b.typ)
	}
	return b
}

// article returns "an" or "a" for word.
func article(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "an"
	}
	return "a"
}

// forCheck returns p with a stand-in name for a nameless circuit breaker,
// so that its other fields can be checked before nameBreaker names it.
func forCheck(p workflow.Policy) workflow.Policy {
	if cb := p.CircuitBreaker; cb != nil && cb.Name == "" {
		c := *cb
		c.Name = "target-host"
		p.CircuitBreaker = &c
	}
	return p
}

// breakerSource is a circuit breaker that may be in force for a body: cb,
// and from, which says where it is written ("" for the body's own).
type breakerSource struct {
	cb   *workflow.CircuitBreaker
	from string
}

// inheritedBreakers returns the circuit breakers a body inherits from its
// workflow (whose circuit_breaker is at wfNode) and from the worker's
// defaults, in that order.
func (p *parser) inheritedBreakers(def *workflow.Definition, wfNode *yaml.Node) []breakerSource {
	from := "the workflow's circuit_breaker"
	if wfNode != nil {
		from += fmt.Sprintf(" (line %d)", wfNode.Line)
	}
	return []breakerSource{{cb: def.Policy.CircuitBreaker, from: from},
		{cb: p.opts.Defaults.CircuitBreaker, from: "the worker's default circuit_breaker"}}
}

// nameBreaker names the nameless circuit breaker in force for a body b (a
// step's or a compensation's: whose), if any: the first of chain, after
// the target host of the built-in http step b.hs. *dst (the body's own
// breaker) gets a copy of it with that name, so that each http step of a
// workflow, and each http compensation, gets its own host's breaker. A
// nameless breaker on a body of another type is an error (at own, the
// body's circuit_breaker, when it is the body's own, else at b.typeNode),
// as is one on an http body whose host is known only at run time (at
// b.urlNode when the breaker is inherited). An await or a sleep, which no
// breaker holds back, keeps no inherited breaker. It returns the name
// given ("" for none).
func (p *parser) nameBreaker(dst **workflow.CircuitBreaker, chain []breakerSource, own *yaml.Node, b body,
	whose, what string) string {
	var cb *workflow.CircuitBreaker
	from := ""
	for _, s := range chain {
		if s.cb != nil {
			cb, from = s.cb, s.from
			break
		}
	}
	if cb == nil || cb.Name != "" {
		return ""
	}
	isWait := b.typ == typeAwait || b.typ == typeSleep
	if b.hs == nil {
		if isWait && from != "" {
			return ""
		}
		only := "only http steps default it to the target host"
		if b.typ == typeHTTP { // Options.StepTypes replaced the built-in one
			only = "only the built-in http step defaults it to the target host"
		}
		if from == "" {
			p.errorf(own, "%s: circuit_breaker: name is required (%s)", what, only)
		} else {
			p.errorf(b.typeNode, "%s: %s has no name, and %s: name that breaker, or give this %s a circuit_breaker "+
				"with a name", what, from, only, whose)
		}
		return ""
	}
	name, err := b.hs.BreakerName()
	if err != nil {
		why := err.Error()
		if errors.Is(err, httpstep.ErrHostTemplated) {
			why = "the URL's host is a template, known only at run time, so it cannot name the breaker"
		}
		if from == "" {
			p.errorf(own, "%s: circuit_breaker: name is required: %s", what, why)
		} else {
			p.errorf(b.urlNode, "%s: with.url: %s has no name, and %s: name that breaker, or give this %s a "+
				"circuit_breaker with a name", what, from, why, whose)
		}
		return ""
	}
	named := *cb
	named.Name = name
	*dst = &named
	return name
}

// withKey returns the value of key in a with mapping, or else def.
func withKey(with *yaml.Node, key string, def *yaml.Node) *yaml.Node {
	if with = resolve(with); with == nil || with.Kind != yaml.MappingNode {
		return def
	}
	m, ok := (&parser{}).asMapping(with, "with")
	if !ok {
		return def
	}
	if v := m.get(key); v != nil {
		return v
	}
	return def
}

// cmpNode returns whichever node comes first in the file.
func cmpNode(a, b *yaml.Node) *yaml.Node {
	if a == nil || (b.Line < a.Line || (b.Line == a.Line && b.Column < a.Column)) {
		return b
	}
	return a
}

// stepTypeError reports a StepType's error: its *Errors at their
// positions (or at, if they have none), anything else at at.
func (p *parser) stepTypeError(err error, at *yaml.Node, what string) {
	var list ErrorList
	var one *Error
	switch {
	case errors.As(err, &list):
	case errors.As(err, &one):
		list = ErrorList{one}
	default:
		p.errorf(at, "%s: %v", what, err)
		return
	}
	for _, e := range list {
		e := *e
		e.File = p.file
		if e.Line == 0 && at != nil {
			e.Line, e.Column = at.Line, at.Column
		}
		e.Msg = what + ": " + e.Msg
		p.errs = append(p.errs, &e)
	}
}

// stepTypes returns the step types: the built-in ones and Options'.
func (p *parser) stepTypes() map[string]StepType {
	t := map[string]StepType{typeHTTP: HTTPStep}
	maps.Copy(t, p.opts.StepTypes)
	t[typeAwait], t[typeSleep] = noBody, noBody
	return t
}

// typeHTTP is the built-in http step's type.
const typeHTTP = "http"

// HTTPStep is the built-in "http" step type (see package httpstep). Its
// "with" mapping has method, url, headers, body and poll (until, interval:
// httpstep.Poll); spec.AllowedHosts
// becomes the httpstep.Spec's AllowedHosts.
func HTTPStep(spec StepSpec) (workflow.StepFunc, error) {
	step, err := httpStep(spec)
	if err != nil {
		return nil, err
	}
	return step.Run, nil
}

// httpStep builds the built-in http step (see HTTPStep).
func httpStep(spec StepSpec) (*httpstep.Step, error) {
	hp := &parser{}
	with := spec.With
	if with == nil {
		return nil, NodeError(nil, "with: missing (an http step needs at least method and url)")
	}
	m, ok := hp.asMapping(with, "with")
	if !ok {
		return nil, hp.list()
	}
	hp.unknown(m, "with", httpKeys...)
	var hs httpstep.Spec
	hs.Steps = spec.Earlier
	// nodes holds the node of each field, where httpstep.New's errors
	// about it are reported.
	nodes := map[string]*yaml.Node{}
	hs.Method, nodes["method"] = hp.httpText(m, "method")
	hs.URL, nodes["url"] = hp.httpText(m, "url")
	hs.Body, nodes["body"] = hp.httpText(m, "body")
	if v := m.get("headers"); v != nil {
		hs.Headers = hp.httpHeaders(v, nodes)
	}
	if v := m.get("poll"); v != nil {
		nodes["poll"] = v
		hs.Poll = hp.httpPoll(v, nodes)
	}
	if len(hp.errs) > 0 {
		return nil, hp.list()
	}
	hs.AllowedHosts = spec.AllowedHosts
	hs.Compensation = spec.Compensation
	step, err := httpstep.New(hs, httpstep.Options{Client: spec.Options.HTTPClient, MaxBodyBytes: spec.Options.MaxBodyBytes})
	if err != nil {
		hp.httpSpecErrors(err, with, m, nodes)
		return nil, hp.list()
	}
	return step, nil
}

// httpText returns the string under key of an http step's with (m), and
// its node; a mapping or a list there is an error, with a hint for body.
// It returns no node when the key is not there.
func (p *parser) httpText(m *mapping, key string) (string, *yaml.Node) {
	v := m.get(key)
	if v == nil {
		return "", nil
	}
	r := resolve(v)
	if r != nil && (r.Kind == yaml.MappingNode || r.Kind == yaml.SequenceNode) {
		hint := ""
		if key == "body" {
			hint = ` (a template: to send JSON, write it as a string, like body: '{"id": {{json .input.id}}}')`
		}
		p.errorf(v, "with.%s: want a string, got %s%s", key, kindName(r), hint)
		return "", v
	}
	s, _ := p.scalar(v, "with."+key)
	return s, v
}

// httpHeaders returns the headers of an http step (v: with.headers), nil
// unless v is a mapping, and records in nodes each header's value and
// name.
func (p *parser) httpHeaders(v *yaml.Node, nodes map[string]*yaml.Node) map[string]string {
	hm, ok := p.asMapping(v, "with.headers")
	if !ok {
		return nil
	}
	headers := map[string]string{}
	for _, e := range hm.entries {
		if s, ok := p.scalar(e.val, "with.headers."+e.name); ok {
			headers[e.name] = s
			nodes["headers."+e.name] = e.val
			nodes["header name "+e.name] = e.key
		}
	}
	return headers
}

// httpPoll returns the poll of an http step (v: with.poll), nil unless v
// is a mapping; until and interval are required. It records their nodes
// in nodes.
func (p *parser) httpPoll(v *yaml.Node, nodes map[string]*yaml.Node) *httpstep.Poll {
	pm, ok := p.asMapping(v, "with.poll")
	if !ok {
		return nil
	}
	p.unknown(pm, "with.poll", pollKeys...)
	poll := &httpstep.Poll{}
	if u := pm.get("until"); u != nil {
		nodes["poll.until"] = u
		poll.Until, _ = p.scalar(u, "with.poll.until")
	} else {
		p.errorf(v, `with.poll: missing key until (a template that is true when done, like {{eq .output.body.status "done"}})`)
	}
	if iv := pm.get("interval"); iv != nil {
		nodes["poll.interval"] = iv
		poll.Interval, _ = p.duration(iv, "with.poll.interval")
	} else {
		p.errorf(v, "with.poll: missing key interval (the delay between requests, like 30s)")
	}
	return poll
}

// httpSpecErrors reports the error of httpstep.New for an http step's
// with (m, from node with): each field's error at the field's node (from
// nodes), at its key or at with when the field is missing; any other
// error at with.
func (p *parser) httpSpecErrors(err error, with *yaml.Node, m *mapping, nodes map[string]*yaml.Node) {
	var fes []*httpstep.FieldError
	collectFieldErrors(err, &fes)
	for _, fe := range fes {
		at := nodes[fe.Field]
		if errors.Is(fe, httpstep.ErrBadHeaderName) {
			at = nodes["header name "+strings.TrimPrefix(fe.Field, "headers.")]
		}
		if at == nil {
			at = with // a missing field
			if k := m.keyNode(fe.Field); k != m.node {
				at = k
			}
		}
		p.errorf(at, "with.%s", fe.Error())
	}
	if len(fes) == 0 {
		p.errorf(with, "with: %v", err)
	}
}

// collectFieldErrors appends the *httpstep.FieldErrors joined in err.
func collectFieldErrors(err error, out *[]*httpstep.FieldError) {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			collectFieldErrors(e, out)
		}
		return
	}
	if fe, ok := errors.AsType[*httpstep.FieldError](err); ok {
		*out = append(*out, fe)
	}
}
