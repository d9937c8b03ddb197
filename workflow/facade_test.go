package workflow_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/cairnhq/cairn/internal/facade"
)

// TestFacadeUpToDate: facade.go is what internal/tools/facade makes of
// internal/core, internal/engine and internal/maintenance now, so the public API cannot drift from the code under
// it. Run go generate ./workflow after changing what internal/engine
// exports.
func TestFacadeUpToDate(t *testing.T) {
	t.Parallel()
	skip, err := facade.ReadSkip("facade_skip.txt")
	if err != nil {
		t.Fatal(err)
	}
	want, err := facade.Generate([]string{"../internal/core", "../internal/engine", "../internal/maintenance"}, "workflow", skip)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("facade.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("workflow/facade.go is out of date: run go generate ./workflow")
	}
}
