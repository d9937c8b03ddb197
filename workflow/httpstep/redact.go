package httpstep

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// Redacted is what stands for a query value in a redacted URL.
const Redacted = "REDACTED"

// RedactURL returns u as a string without its userinfo and fragment, and
// with each query value (and each query part without "=") replaced by
// REDACTED; query keys are kept: https://api.example.com/x?token=REDACTED.
// Every URL in the errors of an http step is written so.
func RedactURL(u *url.URL) string { return redactURL(u) }

func redactURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	r := *u
	r.User = nil
	r.Fragment, r.RawFragment = "", ""
	if r.RawQuery != "" {
		parts := strings.Split(r.RawQuery, "&")
		for i, p := range parts {
			if k, _, ok := strings.Cut(p, "="); ok {
				parts[i] = k + "=" + Redacted
			} else if p != "" {
				parts[i] = Redacted
			}
		}
		r.RawQuery = strings.Join(parts, "&")
	}
	return r.String()
}

// redactRaw redacts a URL given as text; one that does not parse is cut
// to its scheme and host.
func redactRaw(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return redactURL(u)
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return "(a URL that does not parse)"
	}
	if i := strings.IndexAny(rest, "/?#\\"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		rest = rest[i+1:]
	}
	return scheme + "://" + rest + "/..."
}

// urlInText matches the URLs in an error message.
var urlInText = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>` + "`" + `]+`)

// scrubURLs redacts every URL in s.
func scrubURLs(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	return urlInText.ReplaceAllStringFunc(s, redactRaw)
}

// scrubbedError is an error whose message has its URLs redacted.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// redactError returns err with the URLs in its message redacted: a
// *url.Error (what http.Client.Do returns) is rebuilt with a redacted URL
// and a redacted message under it, so that its type and its cause (a
// timeout, say) stay visible to errors.As and errors.Is.
func redactError(err error) error {
	if err == nil {
		return nil
	}
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		inner := ue.Err
		if msg := inner.Error(); scrubURLs(msg) != msg {
			inner = &scrubbedError{msg: scrubURLs(msg), err: inner}
		}
		return &url.Error{Op: ue.Op, URL: redactRaw(ue.URL), Err: inner}
	}
	if msg := err.Error(); scrubURLs(msg) != msg {
		return &scrubbedError{msg: scrubURLs(msg), err: err}
	}
	return err
}

// urlParseError is the error of url.Parse without the URL it embeds.
func urlParseError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		return fmt.Errorf("not a valid URL: %w", ue.Err)
	}
	return err
}
