package httpstep

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/template"
	"text/template/parse"

	"github.com/cairnhq/cairn/workflow"
)

// MaxRenderBytes bounds what one template may render.
const MaxRenderBytes = 1 << 20

// Template is a parsed field template of an http step.
type Template struct {
	name string
	text string
	t    *template.Template
}

// funcs are the functions templates may call besides text/template's.
var funcs = template.FuncMap{"json": toJSON}

// toJSON writes v as compact JSON, without escaping <, > and &.
func toJSON(v any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// ParseTemplate parses text, the template of the field name (used in
// errors). Besides text/template's syntax errors it rejects define, block
// and template actions (a field is one template) and a range over a number
// literal. A missing map key is an error when the template runs.
func ParseTemplate(name, text string) (*Template, error) {
	t, err := template.New(name).Option("missingkey=error").Funcs(funcs).Parse(text)
	if err != nil {
		return nil, err
	}
	if len(t.Templates()) > 1 {
		return nil, fmt.Errorf("template: %s: define and block are not supported in a step field", name)
	}
	if t.Tree == nil || t.Root == nil {
		// Only possible with define/block, rejected above; an empty text
		// parses to an empty list.
		return nil, fmt.Errorf("template: %s: empty template", name)
	}
	if err := check(t.Root); err != nil {
		return nil, fmt.Errorf("template: %s: %w", name, err)
	}
	return &Template{name: name, text: text, t: t}, nil
}

// check rejects the actions ParseTemplate does not support.
func check(n parse.Node) error {
	var err error
	walk(n, true, func(n parse.Node, _ bool) {
		if err != nil {
			return
		}
		switch n := n.(type) {
		case *parse.TemplateNode:
			err = fmt.Errorf("{{template %q}} is not supported in a step field", n.Name)
		case *parse.RangeNode:
			if n.Pipe != nil && len(n.Pipe.Cmds) == 1 && len(n.Pipe.Cmds[0].Args) == 1 {
				if _, ok := n.Pipe.Cmds[0].Args[0].(*parse.NumberNode); ok {
					err = errors.New("range over a number is not supported")
				}
			}
		}
	})
	return err
}

// walk calls fn on n and every node under it; top says whether the node is
// evaluated with dot at the template's data (outside range and with bodies).
func walk(n parse.Node, top bool, fn func(n parse.Node, top bool)) {
	if n == nil || isNilNode(n) {
		return
	}
	fn(n, top)
	switch n := n.(type) {
	case *parse.ListNode:
		for _, c := range n.Nodes {
			walk(c, top, fn)
		}
	case *parse.ActionNode:
		walk(n.Pipe, top, fn)
	case *parse.PipeNode:
		for _, d := range n.Decl {
			walk(d, top, fn)
		}
		for _, c := range n.Cmds {
			walk(c, top, fn)
		}
	case *parse.CommandNode:
		for _, a := range n.Args {
			walk(a, top, fn)
		}
	case *parse.ChainNode:
		walk(n.Node, top, fn)
	case *parse.IfNode:
		walkBranch(&n.BranchNode, top, top, fn)
	case *parse.RangeNode:
		walkBranch(&n.BranchNode, top, false, fn)
	case *parse.WithNode:
		walkBranch(&n.BranchNode, top, false, fn)
	case *parse.TemplateNode:
		walk(n.Pipe, top, fn)
	}
}

func walkBranch(b *parse.BranchNode, top, bodyTop bool, fn func(parse.Node, bool)) {
	walk(b.Pipe, top, fn)
	walk(b.List, bodyTop, fn)
	// A with's else runs with dot unchanged; a range's else too.
	walk(b.ElseList, top, fn)
}

// isNilNode reports a typed nil (a *parse.ListNode that is nil, say).
func isNilNode(n parse.Node) bool {
	switch n := n.(type) {
	case *parse.ListNode:
		return n == nil
	case *parse.PipeNode:
		return n == nil
	}
	return false
}

// StepRefs returns the step names the template reads as .steps.NAME (or
// $.steps.NAME), sorted, without duplicates. References through index or
// inside range and with bodies are not seen.
func (t *Template) StepRefs() []string {
	var refs []string
	walk(t.t.Root, true, func(n parse.Node, top bool) {
		switch n := n.(type) {
		case *parse.FieldNode:
			if top && len(n.Ident) >= 2 && n.Ident[0] == "steps" {
				refs = append(refs, n.Ident[1])
			}
		case *parse.VariableNode:
			if len(n.Ident) >= 3 && n.Ident[0] == "$" && n.Ident[1] == "steps" {
				refs = append(refs, n.Ident[2])
			}
		}
	})
	slices.Sort(refs)
	return slices.Compact(refs)
}

// Reads reports whether the template reads the top-level key of its data
// named key, as .KEY (outside range and with bodies) or $.KEY. Reads
// through index are not seen.
func (t *Template) Reads(key string) bool {
	found := false
	walk(t.t.Root, true, func(n parse.Node, top bool) {
		switch n := n.(type) {
		case *parse.FieldNode:
			found = found || (top && len(n.Ident) >= 1 && n.Ident[0] == key)
		case *parse.VariableNode:
			found = found || (len(n.Ident) >= 2 && n.Ident[0] == "$" && n.Ident[1] == key)
		}
	})
	return found
}

// IsConstant reports whether the template has no actions: it always renders
// its text.
func (t *Template) IsConstant() bool {
	for _, n := range t.t.Root.Nodes {
		if n.Type() != parse.NodeText {
			return false
		}
	}
	return true
}

// Text returns the template's source.
func (t *Template) Text() string { return t.text }

// Execute renders the template with data (see Attempt.Data), at most
// MaxRenderBytes. Errors wrap ErrRender.
func (t *Template) Execute(data any) (string, error) {
	w := &limitedBuffer{max: MaxRenderBytes}
	if err := t.t.Execute(w, data); err != nil {
		if w.over {
			return "", fmt.Errorf("%w: %s renders more than %d bytes", ErrRender, t.name, MaxRenderBytes)
		}
		return "", fmt.Errorf("%w: %w", ErrRender, err)
	}
	return w.b.String(), nil
}

// limitedBuffer is a buffer that fails once it would hold more than max bytes.
type limitedBuffer struct {
	b    bytes.Buffer
	max  int
	over bool
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if l.b.Len()+len(p) > l.max {
		l.over = true
		return 0, errTooLong
	}
	return l.b.Write(p)
}

// Attempt is what an http step's templates are rendered from: one attempt
// of the step, and the outputs of earlier steps.
type Attempt struct {
	RunID          string
	Workflow       string
	Step           string
	Attempt        int
	IdempotencyKey string
	// Input is the run input (JSON).
	Input json.RawMessage
	// Outputs are the outputs (JSON) of earlier steps, by step name; a
	// step without one (skipped) is absent.
	Outputs map[string]json.RawMessage
	// Compensation is set for an attempt of a compensation
	// (workflow.Step.Compensate): the step it undoes, that step's output
	// and the run's failure. nil otherwise.
	Compensation *workflow.Compensation
}

// AttemptOf returns the attempt sc describes, with the outputs of those of
// the named steps that have one.
func AttemptOf(sc *workflow.StepContext, steps []string) Attempt {
	a := Attempt{RunID: sc.RunID, Workflow: sc.Workflow, Step: sc.Step, Attempt: sc.Attempt,
		IdempotencyKey: sc.IdempotencyKey, Input: sc.Input, Outputs: make(map[string]json.RawMessage, len(steps)),
		Compensation: sc.Compensation}
	for _, name := range steps {
		if raw, ok := sc.Output(name); ok {
			a.Outputs[name] = raw
		}
	}
	return a
}

// Data returns the data templates are rendered with (see the package
// documentation). JSON numbers decode to json.Number. An input or output
// that is not JSON is a permanent error.
func (a Attempt) Data() (map[string]any, error) {
	var input any
	if len(bytes.TrimSpace(a.Input)) > 0 {
		if err := decodeJSON(a.Input, &input); err != nil {
			return nil, workflow.Permanent(fmt.Errorf("decode run input: %w", err))
		}
	}
	outs := make(map[string]any, len(a.Outputs))
	for name, raw := range a.Outputs {
		var v any
		if err := decodeJSON(raw, &v); err != nil {
			return nil, workflow.Permanent(fmt.Errorf("decode output of step %q: %w", name, err))
		}
		outs[name] = v
	}
	data := map[string]any{
		"input":    input,
		"steps":    outs,
		"run_id":   a.RunID,
		"workflow": a.Workflow,
		"step":     a.Step,
		"attempt":  a.Attempt,
	}
	if c := a.Compensation; c != nil {
		var out any
		if len(bytes.TrimSpace(c.Output)) > 0 {
			if err := decodeJSON(c.Output, &out); err != nil {
				return nil, workflow.Permanent(fmt.Errorf("decode output of step %q (compensated): %w", c.Step, err))
			}
		}
		data["compensation"] = map[string]any{
			"step":           c.Step,
			"output":         out,
			"failure_code":   c.FailureCode,
			"failure_reason": c.FailureReason,
		}
	}
	return data, nil
}

// decodeJSON decodes one JSON value with numbers as json.Number.
func decodeJSON(b []byte, v *any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}
