package yamldef

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/cairnhq/cairn/internal/regularfile"
	"github.com/cairnhq/cairn/workflow"
)

// MaxFileBytes bounds the size of a workflows file.
const MaxFileBytes = 8 << 20

// Options configure loading.
type Options struct {
	// HTTPClient sends the requests of http steps. Default: httpstep's.
	HTTPClient *http.Client
	// MaxBodyBytes caps the response of an http step, its headers and body
	// together (httpstep.Options.MaxBodyBytes). Default
	// httpstep.DefaultMaxBodyBytes (1 MiB).
	MaxBodyBytes int64
	// Defaults is the global policy of the worker that will run the
	// workflows (from the CAIRN_* environment): each step's effective
	// policy (step > workflow > Defaults > built-in) is checked against it,
	// as the worker does when it registers the definitions.
	Defaults workflow.Policy
	// StepTypes adds step types, by the name a step's "type" gives; one
	// named "http" replaces the built-in http step.
	StepTypes map[string]StepType
}

// StepType builds the body of a step of one type from its spec. An error
// that is not an *Error (see NodeError) is reported at the step's "with"
// mapping.
type StepType func(spec StepSpec) (workflow.StepFunc, error)

// StepSpec is what a StepType gets to build a step, or a step's
// compensation (Compensation).
type StepSpec struct {
	// Workflow and Name name the step; Index is its position (from 0).
	Workflow string
	Name     string
	Index    int
	// Earlier lists the names of the steps before it, whose outputs it may
	// read. The specs of a workflow's steps share its array: read it, keep
	// it if need be, but do not change its elements.
	Earlier []string
	// AllowedHosts is the allowed_hosts list of the step, or else of its
	// workflow (the step's replaces the workflow's), each entry checked by
	// httpstep.ParseAllowedHost and in its canonical form; nil when
	// neither sets one, empty when the step sets [].
	AllowedHosts []string
	// With is the step's "with" mapping, aliases resolved; nil when absent.
	With *yaml.Node
	// Compensation is true when the body to build is the compensation of
	// the step Name (its compensate mapping; see workflow.Step.Compensate):
	// Earlier then ends with Name, AllowedHosts is the compensation's
	// allowed_hosts or else the step's (as above), With is the
	// compensation's, and the body's StepContext has Compensation set.
	Compensation bool
	// Options are the loader's options.
	Options Options
}

// Error is one problem in a workflows file, at a position. Line and Column
// count from 1; 0 when unknown.
type Error struct {
	File   string
	Line   int
	Column int
	Msg    string
}

// Error returns "FILE:LINE:COL: message", leaving out what is unknown.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(":" + strconv.Itoa(e.Line))
		if e.Column > 0 {
			b.WriteString(":" + strconv.Itoa(e.Column))
		}
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns workflow.ErrInvalidDefinition.
func (e *Error) Unwrap() error { return workflow.ErrInvalidDefinition }

// NodeError returns an *Error at n's position, for a StepType to report a
// problem in its "with" mapping. The loader fills in the file name.
func NodeError(n *yaml.Node, format string, args ...any) *Error {
	e := &Error{Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	return e
}

// ErrorList is every problem of a file, in the order of their positions.
// Its Error puts each on a line of its own.
type ErrorList []*Error

// Error returns the problems, one per line.
func (l ErrorList) Error() string {
	s := make([]string, len(l))
	for i, e := range l {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// Unwrap returns the errors, for errors.Is and errors.As.
func (l ErrorList) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// Load reads and parses the workflows file at path (see Parse). A file that
// cannot be read is an error that is not an ErrorList.
func Load(path string, opts Options) ([]*workflow.Definition, error) {
	// Only a regular file: opening a named pipe would block until a writer
	// came, and a device may never end.
	data, err := regularfile.Read(context.Background(), path, MaxFileBytes)
	var notRegular *regularfile.NotRegularError
	switch {
	case errors.As(err, &notRegular):
		return nil, ErrorList{{File: path, Msg: notRegular.Kind + ", not a regular file; a workflows file must be a regular file"}}
	case errors.Is(err, regularfile.ErrTooLarge):
		return nil, ErrorList{{File: path, Msg: fmt.Sprintf("file larger than %d bytes", MaxFileBytes)}}
	case err != nil:
		return nil, err
	}
	return Parse(path, data, opts)
}

// Parse parses a workflows file's contents; filename is used in errors. It
// returns the definitions in the file's order, each valid (see
// workflow.Definition.Validate), or an ErrorList with every problem found.
func Parse(filename string, data []byte, opts Options) (defs []*workflow.Definition, err error) {
	p := &parser{file: filename, opts: opts}
	defer func() {
		// The YAML parser is not known to panic; if it ever does, the
		// file is reported bad rather than the worker crashing.
		if r := recover(); r != nil {
			defs, err = nil, ErrorList{{File: filename, Msg: fmt.Sprintf("cannot parse the file: %v", r)}}
		}
	}()
	defs = p.parseFile(data)
	if len(p.errs) > 0 {
		return nil, p.list()
	}
	return defs, nil
}

// parser collects the problems of one file.
type parser struct {
	file string
	opts Options
	errs []*Error
}

func (p *parser) errorf(n *yaml.Node, format string, args ...any) {
	e := NodeError(n, format, args...)
	e.File = p.file
	p.errs = append(p.errs, e)
}

func (p *parser) list() ErrorList {
	l := ErrorList(p.errs)
	sort.SliceStable(l, func(i, j int) bool {
		if l[i].Line != l[j].Line {
			return l[i].Line < l[j].Line
		}
		return l[i].Column < l[j].Column
	})
	return l
}

// yamlLineRE matches the position of a YAML syntax error.
var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntaxError reports an error of the YAML parser.
func (p *parser) syntaxError(err error) {
	msg := err.Error()
	e := &Error{File: p.file, Msg: msg}
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
		e.Msg = "yaml: " + m[2]
	}
	p.errs = append(p.errs, e)
}

func (p *parser) parseFile(data []byte) []*workflow.Definition {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			p.errs = append(p.errs, &Error{File: p.file, Msg: "the file is empty: want a mapping with the key workflows"})
		} else {
			p.syntaxError(err)
		}
		return nil
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		p.errorf(&extra, "more than one YAML document (---): want one")
	} else if !errors.Is(err, io.EOF) {
		p.syntaxError(err)
	}
	if len(doc.Content) == 0 {
		p.errorf(&doc, "the file is empty: want a mapping with the key workflows")
		return nil
	}
	if !p.checkAliases(&doc) {
		return nil
	}
	root, ok := p.asMapping(doc.Content[0], "the file")
	if !ok {
		return nil
	}
	allowed := []string{"workflows"}
	for _, e := range root.entries {
		if strings.HasPrefix(e.name, "x-") { // extension keys: a place for anchors
			allowed = append(allowed, e.name)
		}
	}
	p.unknown(root, "the file", allowed...)
	wfs := root.get("workflows")
	if wfs == nil {
		p.errorf(root.node, "missing key workflows")
		return nil
	}
	m, ok := p.asMapping(wfs, "workflows")
	if !ok {
		return nil
	}
	if len(m.entries) == 0 {
		p.errorf(wfs, "workflows: no workflows defined")
		return nil
	}
	var defs []*workflow.Definition
	for _, e := range m.entries {
		if d := p.parseWorkflow(e); d != nil {
			defs = append(defs, d)
		}
	}
	return defs
}
