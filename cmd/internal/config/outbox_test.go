package config_test

import (
	"path/filepath"
	"testing"

	"github.com/cairnhq/cairn/cmd/internal/config"
)

func TestOutboxPath(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "outbox.db")
	c, err := config.Load([]string{"CAIRN_OUTBOX=" + path})
	if err != nil || c.Outbox != path {
		t.Fatalf("Load: %+v, %v", c.Outbox, err)
	}
	if c, err := config.Load(nil); err != nil || c.Outbox != "" {
		t.Fatalf("unset: %q, %v; want no outbox", c.Outbox, err)
	}
}
