package deploy_test

import (
	"bufio"
	"bytes"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// unit is a systemd unit file: section -> key -> values, in order (a key may
// be given several times).
type unit map[string]map[string][]string

func readUnit(t *testing.T, path string) unit {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u := unit{}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = strings.Trim(line, "[]")
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: not key=value in a section: %q", path, n, line)
			}
			u[section][k] = append(u[section][k], v)
		}
	}
	return u
}

func (u unit) last(section, key string) string {
	v := u[section][key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// TestSystemdUnit checks the unit's hardening, its files and configuration
// against the service, and runs systemd-analyze verify (clean: no output at
// all, since it reports unknown keys and bad values as warnings with exit
// status 0) and systemd-analyze security on it.
func TestSystemdUnit(t *testing.T) {
	const path = "systemd/asyncstatus.service"
	u := readUnit(t, path)
	s := "Service"
	for key, want := range map[string]string{
		"DynamicUser": "yes", "NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes",
		"PrivateTmp": "yes", "PrivateDevices": "yes", "MemoryDenyWriteExecute": "yes", "RestrictSUIDSGID": "yes",
		"LockPersonality": "yes", "CapabilityBoundingSet": "", "Restart": "on-failure",
	} {
		if got, ok := u[s][key]; !ok || u.last(s, key) != want {
			t.Errorf("%s: %s=%q, want %q", path, key, got, want)
		}
	}

	exec0 := strings.Fields(u.last(s, "ExecStart"))
	if len(exec0) < 2 || exec0[1] != "serve" || !filepath.IsAbs(exec0[0]) {
		t.Fatalf("%s: ExecStart %q, want /path/to/asyncstatus serve ...", path, exec0)
	}
	i := slices.Index(exec0, "--config")
	if i < 0 || i+1 >= len(exec0) {
		t.Fatalf("%s: ExecStart passes no --config", path)
	}
	if filepath.Base(exec0[i+1]) != "config.yaml" {
		t.Fatalf("%s: --config %s: the shipped file is systemd/config.yaml", path, exec0[i+1])
	}
	envFile := u.last(s, "EnvironmentFile")
	if strings.HasPrefix(envFile, "-") || filepath.Base(envFile) != "asyncstatus.env" {
		t.Fatalf("%s: EnvironmentFile=%s, want a required .../asyncstatus.env (shipped as asyncstatus.env.example)", path, envFile)
	}

	env := readEnvFile(t, "systemd/asyncstatus.env.example")
	checkEnvNames(t, "systemd/asyncstatus.env.example", slices.Collect(maps.Keys(env)))
	cfgText, err := os.ReadFile("systemd/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := effectiveConfig(t, "systemd config.yaml + asyncstatus.env.example", string(cfgText), env)
	if stop := durationOf(t, path+" TimeoutStopSec", u.last(s, "TimeoutStopSec")); stop <= cfg.HTTP.ShutdownTimeout {
		t.Errorf("%s: TimeoutStopSec %s must exceed http.shutdown_timeout %s", path, stop, cfg.HTTP.ShutdownTimeout)
	}

	// systemd-analyze checks the unit in a root of its own: verify needs the
	// ExecStart binary to exist and the units the service depends on
	// (sysinit.target, ...), so the root gets a copy of this machine's
	// system units and a stand-in executable at the ExecStart path. Nothing
	// is installed on the machine itself.
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatalf("systemd-analyze is missing: run make deps (apt-get install systemd); the unit is checked with it")
	}
	root := t.TempDir()
	units := ""
	for _, d := range []string{"/usr/lib/systemd/system", "/lib/systemd/system"} {
		if fi, err := os.Stat(filepath.Join(d, "sysinit.target")); err == nil && !fi.IsDir() {
			units = d
			break
		}
	}
	if units == "" {
		t.Fatalf("no systemd unit directory with sysinit.target on this machine: install Debian's systemd package (make deps)")
	}
	if err := os.MkdirAll(filepath.Join(root, "usr/lib/systemd"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "cp", "-r", units, filepath.Join(root, "usr/lib/systemd/system"))
	mustWrite(t, filepath.Join(root, exec0[0]), "#!/bin/sh\n", 0o755)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(root, "etc/systemd/system/asyncstatus.service"), string(data), 0o644)

	out, err := exec.Command(analyze, "verify", "--root="+root, "asyncstatus.service").CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	// The exposure score (0 = fully locked down, 10 = not at all); ours is
	// 1.2 ("OK") with systemd 252. The threshold catches a lost directive.
	const threshold = 2.0
	out, err = exec.Command(analyze, "security", "--offline=yes", "--root="+root,
		"--threshold="+strconv.FormatFloat(threshold*10, 'f', 0, 64), "asyncstatus.service").CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze security: exposure above %.1f, or it failed: %v\n%s", threshold, err, lastLines(out, 3))
	}
	t.Logf("systemd-analyze security: %s", lastLines(out, 1))
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func mustRun(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

func mustWrite(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}
