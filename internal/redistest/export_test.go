package redistest

// SetFallbackPaths replaces the locations tried when redis-server is not on
// PATH and returns a function restoring them. Not safe for parallel tests.
func SetFallbackPaths(paths []string) (restore func()) {
	old := fallbackPaths
	fallbackPaths = paths
	return func() { fallbackPaths = old }
}
