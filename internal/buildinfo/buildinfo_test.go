package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestFrom(t *testing.T) {
	vcs := func(rev, modified string) *debug.BuildInfo {
		return &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261201205901-4d44921a1b2c+dirty"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}}
	}
	for _, tc := range []struct {
		name    string
		stamped string
		bi      *debug.BuildInfo
		want    Info
		line    string
	}{
		{"NoBuildInfo", "", nil, Info{Version: "dev"}, "dev"},
		{"StampedWithoutBuildInfo", "0.1.0", nil, Info{Version: "0.1.0"}, "0.1.0"},
		{"ToolchainVersion", "", vcs("4d44921a1b2c", "true"),
			Info{Version: "v0.0.0-20261201205901-4d44921a1b2c+dirty", Revision: "4d44921a1b2c", Modified: true, GoVersion: "go1.26.8"},
			"v0.0.0-20261201205901-4d44921a1b2c+dirty (revision 4d44921a1b2c, modified) go1.26.8"},
		{"StampedWins", "0.1.0", vcs("4d44921a1b2c", "false"),
			Info{Version: "0.1.0", Revision: "4d44921a1b2c", GoVersion: "go1.26.8"},
			"0.1.0 (revision 4d44921a1b2c) go1.26.8"},
		{"Devel", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			Info{Version: "dev", GoVersion: "go1.26.8"}, "dev go1.26.8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := From(tc.stamped, tc.bi)
			if tc.bi == nil {
				tc.want.GoVersion = got.GoVersion // the running toolchain's
				tc.line += " " + got.GoVersion
			}
			if got != tc.want {
				t.Fatalf("From = %+v, want %+v", got, tc.want)
			}
			if got.String() != tc.line {
				t.Fatalf("String = %q, want %q", got.String(), tc.line)
			}
		})
	}
}
