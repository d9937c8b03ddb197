package httpstep

import "errors"

// Errors of the package. They are wrapped with context; test them with
// errors.Is.
var (
	// ErrHostTemplated is wrapped by the FieldError of a URL template that
	// renders into the scheme, userinfo, host or port of the URL without an
	// allowed_hosts list.
	ErrHostTemplated = errors.New("renders into the scheme, userinfo, host or port")
	// ErrRender is wrapped by every error of rendering a template.
	ErrRender = errors.New("render")
	// ErrBadHeaderName is wrapped by the FieldError of a header name that
	// is not an HTTP token.
	ErrBadHeaderName = errors.New("is not a valid header name")
	// ErrNotCompensation is the problem of the FieldError of a template
	// that reads .compensation in a spec that is not a compensation's
	// (Spec.Compensation).
	ErrNotCompensation = errors.New("reads .compensation, which only the templates of a compensation can read")
)

// errTooLong: a template rendered more than its limit.
var errTooLong = errors.New("output too long")
