package yamldef

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/cairnhq/cairn/workflow"
	"github.com/cairnhq/cairn/workflow/httpstep"
)

// The built-in step types that have no body: an await of a signal and a
// sleep (see workflow.Await and workflow.Sleep). They take precedence over
// Options.StepTypes of the same names.
const (
	typeAwait = "await"
	typeSleep = "sleep"
)

// The keys of the with mapping of an await and of a sleep.
var (
	awaitKeys = []string{"signal", "timeout"}
	sleepKeys = []string{"duration", "until"}
)

// noBody stands for await and sleep in the list of step types; the parser
// handles them itself and never calls it.
func noBody(StepSpec) (workflow.StepFunc, error) {
	return nil, errors.New("await and sleep steps have no body")
}

// parseWait parses the "with" mapping of an await step (signal, timeout) or
// of a sleep step (duration, or until: a template of an RFC 3339 time,
// rendered from the run's input and earlier outputs as an http step's
// templates are) into st.
func (p *parser) parseWait(st *workflow.Step, typ string, with, typeNode *yaml.Node, earlier []string, what string) {
	if with == nil {
		p.errorf(typeNode, "%s: a %s step needs a with mapping (%s)", what, typ,
			map[string]string{typeAwait: "signal and timeout", typeSleep: "duration or until"}[typ])
		return
	}
	m, ok := p.asMapping(with, what+": with")
	if !ok {
		return
	}
	if typ == typeAwait {
		p.unknown(m, what+": with", awaitKeys...)
		a := &workflow.Await{}
		if v := m.get("signal"); v == nil {
			p.errorf(m.node, "%s: with: missing key signal", what)
		} else if s, ok := p.scalar(v, what+": with.signal"); ok {
			a.Signal = s
			if msg := nameError("w", s); msg != "" {
				p.errorf(v, "%s: with.signal: %q: a signal name must be 1-64 letters, digits, '.' or '_'", what, clip(s))
			}
		}
		if v := m.get("timeout"); v == nil {
			p.errorf(m.node, "%s: with: missing key timeout (how long to wait for the signal, like 48h)", what)
		} else if d, ok := p.duration(v, what+": with.timeout"); ok {
			if d > workflow.MaxWait {
				p.errorf(v, "%s: with.timeout: %s is longer than %s", what, d, workflow.MaxWait)
			}
			a.Timeout = d
		}
		st.Await = a
		return
	}
	p.unknown(m, what+": with", sleepKeys...)
	dur, until := m.get("duration"), m.get("until")
	switch {
	case dur == nil && until == nil:
		p.errorf(m.node, "%s: with: want duration (like 10m) or until (an RFC 3339 time, may be a template)", what)
	case dur != nil && until != nil:
		p.errorf(until, "%s: with: duration and until both set; keep one", what)
	case dur != nil:
		if d, ok := p.duration(dur, what+": with.duration"); ok {
			if d > workflow.MaxWait {
				p.errorf(dur, "%s: with.duration: %s is longer than %s", what, d, workflow.MaxWait)
			}
			st.Sleep = &workflow.Sleep{For: d}
		}
	default:
		text, ok := p.scalar(until, what+": with.until")
		if !ok {
			return
		}
		tpl, err := httpstep.ParseTemplate("until", text)
		if err != nil {
			p.errorf(until, "%s: with.until: %v", what, err)
			return
		}
		for _, ref := range tpl.StepRefs() {
			if !slices.Contains(earlier, ref) {
				p.errorf(until, "%s: with.until reads .steps.%s, which is not an earlier step", what, ref)
			}
		}
		if tpl.Reads("compensation") {
			p.errorf(until, "%s: with.until %v", what, httpstep.ErrNotCompensation)
		}
		if tpl.IsConstant() {
			if _, err := parseUntil(text); err != nil {
				p.errorf(until, "%s: with.until: %v", what, err)
				return
			}
		}
		st.Sleep = &workflow.Sleep{Until: func(sc *workflow.StepContext) (time.Time, error) {
			data, err := httpstep.AttemptOf(sc, earlier).Data()
			if err != nil {
				return time.Time{}, err
			}
			s, err := tpl.Execute(data)
			if err != nil {
				return time.Time{}, fmt.Errorf("with.until: %w", err)
			}
			return parseUntil(s)
		}}
	}
}

// parseUntil reads a sleep's end: an RFC 3339 time.
func parseUntil(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(s))
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not an RFC 3339 time (like 2030-01-02T15:04:05Z)", clip(s))
	}
	return t, nil
}
