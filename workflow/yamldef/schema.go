package yamldef

import (
	"bytes"
	_ "embed" // schema.json
)

//go:embed schema.json
var schemaJSON []byte

// Schema returns the JSON Schema (draft 2020-12) of the workflows file
// format, the repository's workflow/yamldef/schema.json: editors validate
// a file with it as it is written, and complete its keys. It checks the
// file's shape (keys, types, enums, names, durations, numbers); Parse
// checks the rest (templates, which steps a template may read, unique step
// names, groups, hosts, policies with the worker's defaults). Step types
// added with Options.StepTypes are not in it.
func Schema() []byte { return bytes.Clone(schemaJSON) }
