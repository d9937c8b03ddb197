package deploy_test

import (
	"slices"
	"testing"
)

// promqlNames returns the metric names a PromQL expression selects and
// the label names it matches on or groups by. It is a lexer, not a
// parser: enough to check names against what the worker exports (promtool
// checks the syntax). An identifier followed by "(" is a function or an
// aggregation; the identifiers in the parentheses after by, without, on,
// ignoring, group_left and group_right are labels, as are those before a
// matcher in braces; ranges in brackets (durations, $__rate_interval) and
// strings are skipped.
func promqlNames(expr string) (metrics, labels []string) {
	add := func(list *[]string, s string) {
		if !slices.Contains(*list, s) {
			*list = append(*list, s)
		}
	}
	isStart := func(c byte) bool { return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	isPart := func(c byte) bool { return isStart(c) || c >= '0' && c <= '9' }
	skipSpace := func(i int) int {
		for i < len(expr) && (expr[i] == ' ' || expr[i] == '\t' || expr[i] == '\n' || expr[i] == '\r') {
			i++
		}
		return i
	}
	skipString := func(i int) int { // expr[i] is the opening quote
		q := expr[i]
		for i++; i < len(expr) && expr[i] != q; i++ {
			if expr[i] == '\\' && q != '`' {
				i++
			}
		}
		return i + 1
	}
	ident := func(i int) (string, int) {
		j := i
		for j < len(expr) && isPart(expr[j]) {
			j++
		}
		return expr[i:j], j
	}
	// labelList reads "(a, b)" from i, if there, into labels.
	labelList := func(i int) int {
		j := skipSpace(i)
		if j >= len(expr) || expr[j] != '(' {
			return i
		}
		for j++; j < len(expr) && expr[j] != ')'; {
			if isStart(expr[j]) {
				var s string
				s, j = ident(j)
				add(&labels, s)
				continue
			}
			j++
		}
		return j + 1
	}
	// The operators, and the aggregations, which may come before their
	// "by (...)" rather than their "(".
	keywords := []string{"and", "or", "unless", "offset", "bool", "atan2", "inf", "nan", "Inf", "NaN",
		"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk",
		"quantile", "limitk", "limit_ratio"}
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '#':
			for i < len(expr) && expr[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'' || c == '`':
			i = skipString(i)
		case c == '[':
			for i < len(expr) && expr[i] != ']' {
				i++
			}
		case c == '{':
			// Matchers: name op "value", ...
			for i++; i < len(expr) && expr[i] != '}'; {
				switch {
				case expr[i] == '"' || expr[i] == '\'' || expr[i] == '`':
					i = skipString(i)
				case isStart(expr[i]):
					var s string
					s, i = ident(i)
					add(&labels, s)
				default:
					i++
				}
			}
			i++
		case c >= '0' && c <= '9' || c == '.':
			for i < len(expr) && (isPart(expr[i]) || expr[i] == '.') {
				i++
			}
		case isStart(c):
			var s string
			s, i = ident(i)
			switch {
			case slices.Contains([]string{"by", "without", "on", "ignoring", "group_left", "group_right"}, s):
				i = labelList(i)
			case slices.Contains(keywords, s):
			default:
				if j := skipSpace(i); j < len(expr) && expr[j] == '(' {
					continue // a function or an aggregation
				}
				add(&metrics, s)
			}
		default:
			i++
		}
	}
	return metrics, labels
}

func TestPromQLNames(t *testing.T) {
	for _, tc := range []struct {
		expr            string
		metrics, labels []string
	}{
		{`max by (queue) (delta(cairn_runs_needing_attention[30m]) * on (job, instance) group_left (queue) cairn_info) > 0`,
			[]string{"cairn_runs_needing_attention", "cairn_info"}, []string{"queue", "job", "instance"}},
		{`histogram_quantile(0.9, sum by (le) (rate(cairn_step_duration_seconds_bucket{workflow=~"$workflow", step!="a{b}"}[$__rate_interval]))) or vector(0)`,
			[]string{"cairn_step_duration_seconds_bucket"}, []string{"le", "workflow", "step"}},
		{"absent(up{job=\"cairn\"} == 1) unless bool x offset 5m # comment mentions y\n",
			[]string{"up", "x"}, []string{"job"}},
		{`sum without (instance) (rate(a:b_total[5m] @ end())) / ignoring(kind) c`,
			[]string{"a:b_total", "c"}, []string{"instance", "kind"}},
	} {
		m, l := promqlNames(tc.expr)
		if !slices.Equal(m, tc.metrics) || !slices.Equal(l, tc.labels) {
			t.Errorf("promqlNames(%q) = %q, %q; want %q, %q", tc.expr, m, l, tc.metrics, tc.labels)
		}
	}
}
