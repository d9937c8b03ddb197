package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// validateOutbox checks CAIRN_OUTBOX: a file (created on first use) in a
// directory that exists.
func (c Config) validateOutbox(bad func(v, format string, args ...any)) {
	if c.Outbox == "" {
		return
	}
	if fi, err := os.Stat(c.Outbox); err == nil && fi.IsDir() {
		bad("CAIRN_OUTBOX", "%q is a directory: want the path of a file (created on first use)", c.Outbox)
		return
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		bad("CAIRN_OUTBOX", "%v", err)
		return
	}
	dir := filepath.Dir(c.Outbox)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		bad("CAIRN_OUTBOX", "%q: its directory %q does not exist", c.Outbox, dir)
	}
}
