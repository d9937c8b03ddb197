// Package version tells which version of Cairn a binary is, for the
// --version flag of worker and enqueue.
//
// A release sets the version at link time:
//
//	go build -ldflags "-X github.com/cairnhq/cairn/cmd/internal/version.Version=v1.2.0" ./cmd/worker ./cmd/enqueue
//
// (make build VERSION=v1.2.0 does that; so does docker build --build-arg
// VERSION=v1.2.0). Without it the version comes from the build information
// the Go toolchain records in the binary: see [String].
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is the version set at link time with -ldflags -X (see the
// package documentation); empty in other builds.
var Version string

// String returns the binary's version: [Version] when set at link time;
// else the main module's version that the Go toolchain recorded (a tagged
// version or a pseudo-version, as go install module@version records it);
// else the VCS revision the binary was built from, its first 12 characters,
// with "+dirty" when the work tree had uncommitted changes; else "devel"
// (a build without VCS information: go run, -buildvcs=false).
func String() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		info = nil
	}
	return fromBuild(Version, info)
}

// Line is what --version prints: the program, its version, and the Go
// version and platform it was built with, e.g. "enqueue v1.2.0 (go1.26.8
// linux/amd64)".
func Line(program string) string {
	return fmt.Sprintf("%s %s (%s %s/%s)", program, String(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// fromBuild is String for a link-time version and build information (nil:
// none).
func fromBuild(linked string, info *debug.BuildInfo) string {
	if linked != "" {
		return linked
	}
	if info == nil {
		return "devel"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev string
	var dirty bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "+dirty"
	}
	return rev
}
