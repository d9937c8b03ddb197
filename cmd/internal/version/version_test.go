package version

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromBuild(t *testing.T) {
	t.Parallel()
	vcs := func(rev, modified string) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}}
	}
	for _, tc := range []struct {
		name   string
		linked string
		info   *debug.BuildInfo
		want   string
	}{
		{"linked wins", "v1.2.0", &debug.BuildInfo{Main: debug.Module{Version: "v1.1.0"}}, "v1.2.0"},
		{"module version", "", &debug.BuildInfo{Main: debug.Module{Version: "v1.1.0"}}, "v1.1.0"},
		{"pseudo-version", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20260301120000-0123456789ab+dirty"}},
			"v0.0.0-20260301120000-0123456789ab+dirty"},
		{"revision", "", vcs("0123456789abcdef0123456789abcdef01234567", "false"), "0123456789ab"},
		{"dirty revision", "", vcs("0123456789abcdef0123456789abcdef01234567", "true"), "0123456789ab+dirty"},
		{"short revision", "", vcs("abc", "false"), "abc"},
		{"no VCS", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "devel"},
		{"no build info", "", nil, "devel"},
	} {
		if got := fromBuild(tc.linked, tc.info); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestLine(t *testing.T) {
	// Not parallel: it sets Version.
	old := Version
	defer func() { Version = old }()
	Version = "v9.8.7"
	if got := Line("enqueue"); !strings.HasPrefix(got, "enqueue v9.8.7 (go") || !strings.Contains(got, "/") {
		t.Errorf("Line = %q", got)
	}
}
