package e2e

import "fmt"

// violationList collects a suite's invariant violations, the first 50.
type violationList struct {
	violations []string
}

func (v *violationList) violatef(format string, args ...any) {
	if len(v.violations) < 50 {
		v.violations = append(v.violations, fmt.Sprintf(format, args...))
	}
}
