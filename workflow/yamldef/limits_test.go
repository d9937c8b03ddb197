package yamldef_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/workflow"
	"github.com/cairnhq/cairn/workflow/yamldef"
)

// stepsFile returns a workflows file with one workflow, big, of n steps of
// the given type, one line each.
func stepsFile(n int, typ string) []byte {
	var b strings.Builder
	b.WriteString("workflows:\n  big:\n    steps:\n")
	for i := range n {
		fmt.Fprintf(&b, "      - {name: s%d, type: %s, with: {method: GET, url: \"https://api.example.com/%d\"}}\n", i, typ, i)
	}
	return []byte(b.String())
}

// countingTypes returns step types "count", whose builder counts its calls
// in *built.
func countingTypes(built *int) map[string]yamldef.StepType {
	return map[string]yamldef.StepType{"count": func(yamldef.StepSpec) (workflow.StepFunc, error) {
		*built++
		return func(context.Context, *workflow.StepContext) (any, error) { return nil, nil }, nil
	}}
}

// TestTooManyStepsRefusedBeforeParsingThem: a workflow of more than
// workflow.MaxSteps steps is refused at its steps key, before any step is
// built, so that the refusal costs no more than reading the file (a file
// of 20,000 steps took 25 s, and 6 GB, to be refused after every step was
// parsed).
func TestTooManyStepsRefusedBeforeParsingThem(t *testing.T) {
	t.Parallel()
	for _, n := range []int{workflow.MaxSteps + 1, 20000} {
		built := 0
		_, err := yamldef.Parse("huge.yaml", stepsFile(n, "count"), yamldef.Options{StepTypes: countingTypes(&built)})
		want := fmt.Sprintf(`huge.yaml:3:5: workflow "big": steps: %d steps; at most %d`, n, workflow.MaxSteps)
		if err == nil || err.Error() != want {
			t.Errorf("%d steps: %v, want %s", n, err, want)
		}
		if built != 0 {
			t.Errorf("%d steps: %d steps were built before the file was refused, want none", n, built)
		}
	}
	built := 0
	defs, err := yamldef.Parse("max.yaml", stepsFile(workflow.MaxSteps, "count"), yamldef.Options{StepTypes: countingTypes(&built)})
	if err != nil || len(defs[0].Steps) != workflow.MaxSteps || built != workflow.MaxSteps {
		t.Errorf("%d steps: %v (built %d), want them accepted", workflow.MaxSteps, err, built)
	}
}

// TestParseAllocatesLinearly: what Parse allocates grows with the steps,
// not with their square. (Each step's spec held a copy of the names of
// the steps before it, and its http step another: 1,000 steps allocated
// 6.3 times what 250 did.)
func TestParseAllocatesLinearly(t *testing.T) { //nolint:paralleltest // measures the process's allocations
	alloc := func(n int) uint64 {
		data := stepsFile(n, "http")
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if _, err := yamldef.Parse("f.yaml", data, yamldef.Options{}); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	alloc(10) // warm up what is allocated once
	small, large := alloc(250), alloc(1000)
	// Linear: 4 times as much. Quadratic: 16 times, less the linear part.
	if ratio := float64(large) / float64(small); ratio > 5 {
		t.Errorf("1,000 steps allocate %.1f times what 250 do (%d and %d bytes), want about 4", ratio, large, small)
	}
}

// BenchmarkRefuseHugeFile: the refusal of a workflow of 20,000 steps.
func BenchmarkRefuseHugeFile(b *testing.B) {
	data := stepsFile(20000, "http")
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := yamldef.Parse("huge.yaml", data, yamldef.Options{}); err == nil {
			b.Fatal("accepted")
		}
	}
}

// TestAliasesBounded: aliases that repeat more than MaxAliasedNodes nodes
// in all are refused before any workflow is parsed, at the alias that
// repeats the most. (A 107 KB file that named one workflow of 1,000 steps
// under 2,000 names took 134 s and 17 GB to load.) Anchors that share
// settings load.
func TestAliasesBounded(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("x-wf: &wf\n  steps:\n")
	for i := range 1000 {
		fmt.Fprintf(&b, "    - {name: s%d, type: count}\n", i)
	}
	b.WriteString("workflows:\n")
	for i := range 200 {
		fmt.Fprintf(&b, "  w%d: *wf\n", i)
	}
	// Each alias repeats the mapping, its key, the list, and per step its
	// mapping, two keys and two values.
	const perAlias = 3 + 1000*5
	built := 0
	_, err := yamldef.Parse("alias.yaml", []byte(b.String()), yamldef.Options{StepTypes: countingTypes(&built)})
	want := fmt.Sprintf("alias.yaml:1004:7: aliases repeat %d YAML nodes in all, more than %d (*wf here repeats %d): "+
		"write out what they repeat, or repeat less", 200*perAlias, yamldef.MaxAliasedNodes, perAlias)
	if err == nil || err.Error() != want {
		t.Errorf("200 aliases of a workflow:\n%v\nwant\n%s", err, want)
	}
	if built != 0 {
		t.Errorf("%d steps were built before the file was refused, want none", built)
	}

	// Nested aliases (a billion laughs): refused at once, the count
	// saturated rather than overflowed.
	laughs := "x-a: &a [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n"
	prev := "a"
	for name := range strings.SplitSeq("bcdefghijklmnopqrstuvwxyz", "") {
		laughs += fmt.Sprintf("%s: &%s [*%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s]\n", "x-"+name, name,
			prev, prev, prev, prev, prev, prev, prev, prev, prev, prev)
		prev = name
	}
	laughs += "workflows: {w: {steps: [*z]}}\n"
	if _, err := yamldef.Parse("laughs.yaml", []byte(laughs), yamldef.Options{}); err == nil ||
		!strings.Contains(err.Error(), "aliases repeat") {
		t.Errorf("nested aliases: %v, want them refused", err)
	}

	// Shared settings: each step merges a retry block and an http with.
	var ok strings.Builder
	ok.WriteString("x-retry: &retry {max_attempts: 3, initial_delay: 1s}\nx-with: &with {method: GET, url: \"https://api.example.com/\"}\nworkflows:\n")
	for w := range 10 {
		fmt.Fprintf(&ok, "  w%d:\n    steps:\n", w)
		for i := range 1000 {
			fmt.Fprintf(&ok, "      - {name: s%d, type: http, retry: *retry, with: *with}\n", i)
		}
	}
	if defs, err := yamldef.Parse("shared.yaml", []byte(ok.String()), yamldef.Options{}); err != nil || len(defs) != 10 {
		t.Errorf("shared settings: %d workflows, %v; want 10 loaded", len(defs), err)
	}
}
