package dashboard

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/cairnhq/cairn/workflow"
)

// Search: the query parameters that narrow GET /api/v1/workflows and the
// runs page beyond status, workflow and owner (docs/http-api.md's
// "Search"):
//
//	id_prefix   a run ID or its first characters
//	input       input.<path>=<value> conditions, all of which the input has
//	            (may be given more than once: every condition holds)
//	since       created at or after: RFC 3339, a date, or a duration before now (24h)
//	until       created before: the same forms
//	scan_limit  the runs one page of an ID-prefix or input search examines (1 to 10,000; admins)
//
// The owner scoping of the listing applies first: a user's search examines
// only their own runs' inputs.

// searchParamNames are the query parameters of a search, in the order a
// next page's URL keeps them.
var searchParamNames = []string{"id_prefix", "input", "since", "until", "scan_limit"}

// searchForm is a search as given, for the runs page's form and its
// links.
type searchForm struct {
	IDPrefix, Input, Since, Until string
}

// Active reports whether any search filter is set.
func (f searchForm) Active() bool {
	return f.IDPrefix != "" || f.Input != "" || f.Since != "" || f.Until != ""
}

// searchParams reads the search's query parameters into opts. It returns a
// 400 problem naming the parameter, and the position in it, of what is
// wrong.
//
// scan_limit is for admins only (403 for a user): a page that a low bound
// ends tells the millisecond of the last run it examined, which may be
// another owner's, and a user could so list when every run was created.
func (s *Server) searchParams(q url.Values, opts *workflow.ListOptions, admin bool) (searchForm, error) {
	var f searchForm
	bad := func(param string, err error) error {
		if se, ok := errors.AsType[*workflow.SearchError](err); ok {
			msg := se.Msg
			if se.Pos > 0 {
				msg = "position " + strconv.Itoa(se.Pos) + ": " + msg
			}
			return problemf(http.StatusBadRequest, ProblemInvalidRequest, "query parameter %q: %s", param, msg)
		}
		return problemf(http.StatusBadRequest, ProblemInvalidRequest, "query parameter %q: %v", param, err)
	}
	for _, name := range []string{"id_prefix", "since", "until", "scan_limit"} {
		if len(q[name]) > 1 {
			return f, problemf(http.StatusBadRequest, ProblemInvalidRequest, "query parameter %q given %d times: give it once",
				name, len(q[name]))
		}
	}
	if v := q.Get("id_prefix"); v != "" {
		f.IDPrefix = v
		p, err := workflow.ParseIDPrefix(v)
		if err != nil {
			return f, bad("id_prefix", err)
		}
		opts.IDPrefix = p
	}
	var conds []string
	for _, v := range q["input"] {
		if strings.TrimSpace(v) != "" {
			conds = append(conds, v)
		}
	}
	if len(conds) > 0 {
		f.Input = strings.Join(conds, " ")
		for _, c := range conds { // each on its own, so that a position is in the parameter given
			if _, err := workflow.ParseInputFilter(c); err != nil {
				return f, bad("input", err)
			}
		}
		in, err := workflow.ParseInputFilter(f.Input)
		if err != nil {
			return f, bad("input", err)
		}
		opts.Input = in
	}
	now := s.clock.Now()
	if v := q.Get("since"); v != "" {
		f.Since = v
		t, err := workflow.ParseTimeBound("since", v, now)
		if err != nil {
			return f, bad("since", err)
		}
		opts.CreatedFrom = t
	}
	if v := q.Get("until"); v != "" {
		f.Until = v
		t, err := workflow.ParseTimeBound("until", v, now)
		if err != nil {
			return f, bad("until", err)
		}
		opts.CreatedTo = t
	}
	if !opts.CreatedFrom.IsZero() && !opts.CreatedTo.IsZero() && !opts.CreatedTo.After(opts.CreatedFrom) {
		return f, problemf(http.StatusBadRequest, ProblemInvalidRequest, "until (%s) is not after since (%s)",
			opts.CreatedTo.UTC().Format("2006-01-02T15:04:05.000Z07:00"), opts.CreatedFrom.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
	}
	if v := q.Get("scan_limit"); v != "" {
		if !admin {
			return f, problemf(http.StatusForbidden, ProblemForbidden, "only admins set scan_limit")
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > workflow.MaxSearchScan {
			return f, problemf(http.StatusBadRequest, ProblemInvalidRequest, "query parameter \"scan_limit\" %q: want an integer from 1 to %d",
				cut(v, 40), workflow.MaxSearchScan)
		}
		opts.MaxScan = n
	}
	return f, nil
}
