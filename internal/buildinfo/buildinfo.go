// Package buildinfo names the running build: its version, the VCS revision it
// was built from and whether that tree had uncommitted changes. `go build` and
// `go install` record the revision themselves (runtime/debug.ReadBuildInfo), so
// no linker flags are needed; `make build VERSION=x.y.z` stamps a release
// version on top. It imports nothing of the project.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Info describes one build.
type Info struct {
	// Version is the stamped release version, else the module version the Go
	// toolchain derived (a tag, or a pseudo-version such as
	// v0.0.0-20261201205901-4d44921a1b2c+dirty), else "dev" (go run, go test).
	Version string `json:"version"`
	// Revision is the full VCS commit the binary was built from; "" when the
	// build recorded none (go run, go test, -buildvcs=false).
	Revision string `json:"revision"`
	// Modified: the working tree had changes not in Revision.
	Modified bool `json:"modified"`
	// GoVersion is the toolchain that built the binary.
	GoVersion string `json:"go_version"`
}

// Read returns the running build's Info. stamped is the version set with
// -ldflags "-X main.version=..." ("" when none was).
func Read(stamped string) Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return From(stamped, nil)
	}
	return From(stamped, bi)
}

// From is Read over a given debug.BuildInfo (nil: none recorded).
func From(stamped string, bi *debug.BuildInfo) Info {
	info := Info{Version: stamped, GoVersion: runtime.Version()}
	if bi == nil {
		if info.Version == "" {
			info.Version = "dev"
		}
		return info
	}
	if bi.GoVersion != "" {
		info.GoVersion = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	if info.Version == "" {
		// "(devel)" is what the toolchain records when it derived no version.
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			info.Version = v
		} else {
			info.Version = "dev"
		}
	}
	return info
}

// String is the line `asyncstatus version` prints:
// "0.1.0 (revision 4d44921a1b2c, modified) go1.26.8".
func (i Info) String() string {
	var b strings.Builder
	b.WriteString(i.Version)
	if i.Revision != "" {
		b.WriteString(" (revision ")
		b.WriteString(i.Revision)
		if i.Modified {
			b.WriteString(", modified")
		}
		b.WriteString(")")
	}
	b.WriteString(" ")
	b.WriteString(i.GoVersion)
	return b.String()
}
