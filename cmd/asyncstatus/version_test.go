package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// gitState is the revision of the checkout the tests run in, and whether it
// has changes (tracked or untracked), as `go build` records them. In a linked
// worktree (.git is a file) the Go toolchain finds no repository and records
// neither: rev is then "", as the binary will say.
func gitState(t *testing.T) (rev string, modified bool) {
	t.Helper()
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("git rev-parse: %v (the version test needs the git checkout it builds from)", err)
	}
	if fi, err := os.Stat(filepath.Join(strings.TrimSpace(string(top)), ".git")); err != nil || !fi.IsDir() {
		return "", false
	}
	out, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatalf("git rev-parse HEAD: %v", err)
	}
	st, err := exec.Command("git", "status", "--porcelain").Output()
	if err != nil {
		t.Fatalf("git status: %v", err)
	}
	return strings.TrimSpace(string(out)), len(strings.TrimSpace(string(st))) > 0
}

// TestVersionNamesTheBuild: a plain `go build` names its revision and whether
// the tree was modified, with no linker flags; `make build VERSION=...`'s flag
// puts a release version in front; /healthz and asyncstatus_build_info of the
// serving binary say the same.
func TestVersionNamesTheBuild(t *testing.T) {
	rev, modified := gitState(t)
	// what the version line says after the version: " (revision R[, modified])"
	suffix := ""
	if rev != "" {
		suffix = " (revision " + rev + ")"
		if modified {
			suffix = " (revision " + rev + ", modified)"
		}
	}

	// -buildvcs=true, because a machine's go env may turn the default off (this
	// one's does); then go build fails when it cannot read the checkout.
	plain := buildBinary(t, "-buildvcs=true")
	out, err := exec.Command(plain, "version").Output()
	if err != nil {
		t.Fatalf("version: %v", err)
	}
	want := regexp.MustCompile(`^asyncstatus v\S+` + regexp.QuoteMeta(suffix) + ` go1\.\S+\n$`)
	if rev == "" {
		want = regexp.MustCompile(`^asyncstatus dev go1\.\S+\n$`)
	}
	if !want.Match(out) {
		t.Fatalf("version printed %q, want it to match %s", out, want)
	}

	stamped := buildBinary(t, "-buildvcs=true", "-ldflags=-X main.version=9.8.7")
	out, err = exec.Command(stamped, "version").Output()
	if err != nil {
		t.Fatalf("version: %v", err)
	}
	if prefix := "asyncstatus 9.8.7" + suffix + " go1."; !strings.HasPrefix(string(out), prefix) {
		t.Fatalf("version printed %q, want the prefix %q", out, prefix)
	}

	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	cmd := exec.Command(stamped, "serve")
	cmd.Env = []string{"ASYNCSTATUS_HTTP_ADDR=" + addr, "PATH=" + os.Getenv("PATH")}
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = io.Discard, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	base := "http://" + addr
	var res *http.Response
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if res, err = http.Get(base + "/healthz"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not come up: %v\n%s", err, logs.String())
		}
	}
	var health map[string]any
	err = json.NewDecoder(res.Body).Decode(&health)
	res.Body.Close()
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("/healthz: %d %v", res.StatusCode, err)
	}
	if health["status"] != "ok" || health["version"] != "9.8.7" || health["revision"] != rev || health["modified"] != modified ||
		!strings.HasPrefix(fmt.Sprint(health["go_version"]), "go1.") {
		t.Fatalf("/healthz answered %v; want version 9.8.7, revision %s, modified %v", health, rev, modified)
	}
	code, _, metrics := get(t, base+"/metrics")
	line := fmt.Sprintf(`,modified="%v",revision="%s",version="9.8.7"} 1`, modified, rev)
	if code != 200 || !strings.Contains(metrics, "asyncstatus_build_info{goversion=\"go1.") || !strings.Contains(metrics, line) {
		t.Fatalf("/metrics: %d, want asyncstatus_build_info with %s in\n%s", code, line, metrics)
	}
}

// TestVersionOfATaggedCheckout: a release is a tag vX.Y.Z of the repository,
// and a plain `go build` in a checkout of that tag (no flags, no Makefile)
// prints the release version: the Go toolchain takes it from the tag. The
// test tags a clone of this checkout's commit, so it needs git and the
// repository, and fails without them.
func TestVersionOfATaggedCheckout(t *testing.T) {
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("git rev-parse: %v (the version test needs the git checkout it builds from)", err)
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatalf("git rev-parse HEAD: %v", err)
	}
	rev := strings.TrimSpace(string(head))
	dir := filepath.Join(t.TempDir(), "src")
	gitIn := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	gitIn("clone", "-q", "--no-checkout", strings.TrimSpace(string(top)), dir)
	gitIn("-C", dir, "checkout", "-q", "--detach", rev)
	gitIn("-C", dir, "tag", "v0.98.7") // v0 or v1: a v2+ tag needs a /vN module path

	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "asyncstatus")
	args := []string{"build", "-buildvcs=true", "-o", bin}
	if raceEnabled { // as buildBinary: the dependencies then come from the build cache
		args = append(args, "-race")
	}
	build := exec.Command(gobin, append(args, "./cmd/asyncstatus")...)
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build in the tagged checkout: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("version: %v", err)
	}
	if want := "asyncstatus v0.98.7 (revision " + rev + ") go1."; !strings.HasPrefix(string(out), want) {
		t.Fatalf("version printed %q, want the prefix %q", out, want)
	}
}
