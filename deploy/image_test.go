//go:build imagetest

// The image's own test, run by `make image-test` (CI runs it through
// `make test`). It needs podman, root and redis-server; it fails, never
// skips, without them.
//
// What it proves: `make image` builds the image offline; the image holds the
// binary and the CA bundle and nothing else, declares the user, entrypoint,
// port and labels it should; and its entrypoint, run from the image's own
// filesystem as the image's user with the image's environment, serves
// /healthz, /readyz, a create, a poll and a long poll against a real
// redis-server, runs its admin commands, checks the Kubernetes ConfigMap with
// its own `config check`, answers its own health check, refuses to start
// without its two secrets (naming them), and stops cleanly on SIGTERM.
//
// What it does not prove: that a container runtime runs the image. Running
// it under podman fails on machines that forbid the rlimits the runtime sets
// (`crun: setrlimit RLIMIT_NOFILE: Operation not permitted` here and in CI),
// so the entrypoint runs under chroot instead: same files, same user, same
// environment, but the host's network, no namespaces, no cgroup limits and no
// seccomp profile. Nor does it prove that webhook TLS verifies against the
// bundle at run time (that needs a server with a public certificate); it
// checks the bundle is where Go looks and parses.

package deploy_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// imageConfig is the part of `podman image inspect` the test reads.
type imageConfig struct {
	Size         int64  `json:"Size"`
	Os           string `json:"Os"`
	Architecture string `json:"Architecture"`
	Config       struct {
		User         string              `json:"User"`
		Env          []string            `json:"Env"`
		Entrypoint   []string            `json:"Entrypoint"`
		Cmd          []string            `json:"Cmd"`
		ExposedPorts map[string]struct{} `json:"ExposedPorts"`
		Labels       map[string]string   `json:"Labels"`
	} `json:"Config"`
}

func requireImageTools(t *testing.T) string {
	t.Helper()
	podman, err := exec.LookPath("podman")
	if err != nil {
		t.Fatalf("podman is missing: run make deps (apt-get install podman); the image test builds and exports the image with it")
	}
	if os.Geteuid() != 0 {
		t.Fatalf("the image test must run as root: chroot --userspec runs the image's entrypoint as its user")
	}
	if _, err := exec.LookPath("chroot"); err != nil {
		t.Fatalf("chroot is missing (coreutils)")
	}
	return podman
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func runIn(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// TestImage builds the image with `make image` into a private podman store,
// checks what it declares and holds, and runs it (see the file's comment).
func TestImage(t *testing.T) {
	podman := requireImageTools(t)
	repo := repoRoot(t)
	tmp := t.TempDir()

	// A store of the test's own: it neither sees nor changes the machine's
	// images, and vfs works in any container (see mk/ship.mk).
	store := []string{"--root", filepath.Join(tmp, "storage"), "--runroot", filepath.Join(tmp, "run"), "--storage-driver", "vfs"}
	pod := func(args ...string) string {
		return runIn(t, tmp, nil, podman, append(slices.Clone(store), args...)...)
	}
	tag := "localhost/asyncstatus-imagetest:" + randomHex(4)
	start := time.Now()
	runIn(t, repo, nil, "make", "--no-print-directory", "image", "IMAGE="+tag, "CONTAINER_TOOL=podman",
		"CONTAINER_FLAGS="+strings.Join(store, " "))
	t.Logf("make image: %s", time.Since(start).Round(100*time.Millisecond))

	var inspected []imageConfig
	if err := json.Unmarshal([]byte(pod("image", "inspect", tag)), &inspected); err != nil || len(inspected) != 1 {
		t.Fatalf("podman image inspect %s: %v (%d images)", tag, err, len(inspected))
	}
	img := inspected[0]
	declared := readContainerfile(t)
	cfg := img.Config
	if cfg.User != declared.user || !slices.Equal(cfg.Entrypoint, declared.entrypoint) || !slices.Equal(cfg.Cmd, []string{"serve"}) {
		t.Fatalf("image config: user %q entrypoint %q cmd %q; the Containerfile says %q %q [serve]",
			cfg.User, cfg.Entrypoint, cfg.Cmd, declared.user, declared.entrypoint)
	}
	if _, ok := cfg.ExposedPorts["8080/tcp"]; !ok {
		t.Fatalf("image exposes %v, want 8080/tcp", cfg.ExposedPorts)
	}
	if img.Os != "linux" || img.Architecture != runtime.GOARCH {
		t.Fatalf("image platform %s/%s, want linux/%s", img.Os, img.Architecture, runtime.GOARCH)
	}
	for _, l := range []string{"source", "version", "revision", "licenses"} {
		if _, ok := cfg.Labels["org.opencontainers.image."+l]; !ok {
			t.Errorf("image has no label org.opencontainers.image.%s", l)
		}
	}
	if got := cfg.Labels["org.opencontainers.image.licenses"]; got != "Apache-2.0" {
		t.Errorf("license label %q, want Apache-2.0 (LICENSE)", got)
	}

	// The image's filesystem, as a container of it would see it.
	id := strings.TrimSpace(pod("create", tag))
	archive := filepath.Join(tmp, "rootfs.tar")
	pod("export", "-o", archive, id)
	pod("rm", id)
	rootfs := filepath.Join(tmp, "rootfs")
	files := untar(t, archive, rootfs)
	wantFiles := []string{"asyncstatus", "etc/ssl/certs/ca-certificates.crt"}
	if got := slices.Sorted(maps.Keys(files)); !slices.Equal(got, wantFiles) {
		t.Fatalf("the image holds the files %q, want exactly %q", got, wantFiles)
	}
	built, err := os.ReadFile(filepath.Join(repo, "dist/image/asyncstatus"))
	if err != nil {
		t.Fatal(err)
	}
	inImage, err := os.ReadFile(filepath.Join(rootfs, "asyncstatus"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(built, inImage) {
		t.Fatalf("the image's /asyncstatus differs from dist/image/asyncstatus")
	}
	certs := countCerts(t, filepath.Join(rootfs, "etc/ssl/certs/ca-certificates.crt"))
	content := files["asyncstatus"] + files["etc/ssl/certs/ca-certificates.crt"]
	t.Logf("image %s: %d bytes (podman's Size); binary %d bytes, CA bundle %d bytes (%d certificates)",
		tag, img.Size, files["asyncstatus"], files["etc/ssl/certs/ca-certificates.crt"], certs)
	// The layers' tar framing is all the image may add to its two files.
	if img.Size < content || img.Size > content+64<<10 {
		t.Errorf("image size %d bytes, want the binary and the CA bundle (%d bytes) plus at most 64 KiB of framing", img.Size, content)
	}

	// Running it: the image's environment, the image's user, its own files.
	imageEnv := slices.Clone(cfg.Env)
	entry := append([]string{"--userspec=" + cfg.User, rootfs}, cfg.Entrypoint...)
	chroot := func(env []string, args ...string) *exec.Cmd {
		cmd := exec.Command("chroot", append(slices.Clone(entry), args...)...)
		cmd.Env = append(slices.Clone(imageEnv), env...)
		return cmd
	}
	m := readManifests(t)
	configYAML := m.configMap.Data["config.yaml"]
	mustWrite(t, filepath.Join(rootfs, "etc/asyncstatus/config.yaml"), configYAML, 0o644)

	redis := testenv.StartRedisProcess(t, "--appendonly", "yes", "--maxmemory-policy", "noeviction")
	httpPort, consolePort := testenv.FreePort(t), testenv.FreePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	secrets := []string{
		"ASYNCSTATUS_AUTH_POLL_TOKEN_SECRET=" + randomHex(32),
		"ASYNCSTATUS_WEBHOOKS_SECRET_KEY=" + randomHex(32),
	}
	env := append([]string{
		"ASYNCSTATUS_CONFIG=/etc/asyncstatus/config.yaml",
		"ASYNCSTATUS_REDIS_URL=redis://" + redis.Addr() + "/0",
		// The ConfigMap asks one replica to confirm every write; this
		// redis-server has none.
		"ASYNCSTATUS_REDIS_WAIT_REPLICAS=0",
		fmt.Sprintf("ASYNCSTATUS_HTTP_ADDR=127.0.0.1:%d", httpPort),
		fmt.Sprintf("ASYNCSTATUS_CONSOLE_ADDR=127.0.0.1:%d", consolePort),
	}, secrets...)

	t.Run("ConfigCheckOfTheConfigMap", func(t *testing.T) {
		out, err := chroot(append(slices.Clone(env), "ASYNCSTATUS_REDIS_WAIT_REPLICAS="), "config", "check").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "configuration is valid") {
			t.Fatalf("config check of deploy/kubernetes/configmap.yaml, from the image: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "wait_replicas: 1") {
			t.Fatalf("config check did not read the ConfigMap's file (no wait_replicas: 1):\n%s", out)
		}
	})

	t.Run("RefusesToStartWithoutItsSecrets", func(t *testing.T) {
		for _, c := range []struct {
			env  []string
			want []string
		}{
			{nil, []string{"ASYNCSTATUS_AUTH_POLL_TOKEN_SECRET", "ASYNCSTATUS_WEBHOOKS_SECRET_KEY"}},
			{secrets[:1], []string{"ASYNCSTATUS_WEBHOOKS_SECRET_KEY"}},
			{secrets[1:], []string{"ASYNCSTATUS_AUTH_POLL_TOKEN_SECRET"}},
		} {
			var withHeld []string
			for _, kv := range env {
				if !strings.HasPrefix(kv, "ASYNCSTATUS_AUTH_") && !strings.HasPrefix(kv, "ASYNCSTATUS_WEBHOOKS_") {
					withHeld = append(withHeld, kv)
				}
			}
			cmd := chroot(append(withHeld, c.env...), "serve")
			out, err := runWithin(t, cmd, 30*time.Second)
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() == 0 {
				t.Fatalf("serve without %s: %v, want a failure; output:\n%s", c.want, err, out)
			}
			for _, name := range c.want {
				if !strings.Contains(out, name) {
					t.Fatalf("serve without %s: the refusal does not name %s:\n%s", c.want, name, out)
				}
			}
		}
	})

	key := strings.TrimSpace(runChroot(t, chroot(env, "keys", "create", "--tenant", "imagetest", "--scopes", "read,write,admin")))
	if strings.Contains(key, "\n") || key == "" {
		t.Fatalf("keys create printed %q, want the key alone", key)
	}

	serve := chroot(env, "serve")
	var serveOut testenv.Buffer
	serve.Stdout, serve.Stderr = &serveOut, &serveOut
	if err := serve.Start(); err != nil {
		t.Fatalf("start serve from the image: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- serve.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = serve.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("serve's output:\n%s", serveOut.String())
		}
	})
	waitHealthy(t, base+"/healthz", exited)

	client := &http.Client{Timeout: 20 * time.Second}
	do := func(method, path string, hdr map[string]string, body string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	bearer := map[string]string{"Authorization": "Bearer " + key, "Content-Type": "application/json"}

	t.Run("Healthz", func(t *testing.T) {
		resp, body := do("GET", "/healthz", nil, "")
		var h struct{ Status, Version, Revision string }
		if resp.StatusCode != 200 || json.Unmarshal(body, &h) != nil || h.Status != "ok" {
			t.Fatalf("/healthz: %d %s", resp.StatusCode, body)
		}
		rev := cfg.Labels["org.opencontainers.image.revision"]
		if h.Version != cfg.Labels["org.opencontainers.image.version"] || h.Revision != strings.TrimSuffix(rev, "-modified") {
			t.Fatalf("/healthz names version %q revision %q; the image's labels say %q %q", h.Version, h.Revision,
				cfg.Labels["org.opencontainers.image.version"], rev)
		}
		if want, _ := gitHead(t, repo); want != "" && !strings.HasPrefix(rev, want) {
			t.Fatalf("image revision label %q, the checkout is at %s", rev, want)
		}
	})
	t.Run("RunsAsTheImagesUser", func(t *testing.T) {
		// chroot execs the entrypoint in its own process: serve's pid.
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", serve.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		uid, gid, _ := strings.Cut(cfg.User, ":")
		for _, line := range strings.Split(string(status), "\n") {
			f := strings.Fields(line)
			if len(f) == 5 && (f[0] == "Uid:" && !slices.Equal(f[1:], []string{uid, uid, uid, uid}) ||
				f[0] == "Gid:" && !slices.Equal(f[1:], []string{gid, gid, gid, gid})) {
				t.Fatalf("serve runs with %s, want the image's user %s", line, cfg.User)
			}
			if len(f) >= 1 && f[0] == "Name:" && f[1] != "asyncstatus" {
				t.Fatalf("process %d is %s, not the image's entrypoint", serve.Process.Pid, f[1])
			}
		}
	})
	t.Run("Readyz", func(t *testing.T) {
		if resp, body := do("GET", "/readyz", nil, ""); resp.StatusCode != 200 {
			t.Fatalf("/readyz: %d %s", resp.StatusCode, body)
		}
	})
	t.Run("HealthcheckCommand", func(t *testing.T) {
		runChroot(t, chroot(env, "healthcheck")) // /readyz at http.addr's port
		cmd := chroot(env, "healthcheck", "--url", fmt.Sprintf("http://127.0.0.1:%d/readyz", testenv.FreePort(t)))
		if out, err := cmd.CombinedOutput(); err == nil {
			t.Fatalf("healthcheck against a closed port succeeded: %s", out)
		}
	})
	t.Run("Console", func(t *testing.T) {
		noRedirect := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := noRedirect.Get(fmt.Sprintf("http://127.0.0.1:%d/", consolePort))
		if err != nil {
			t.Fatalf("console: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 && resp.StatusCode != 302 && resp.StatusCode != 303 {
			t.Fatalf("console root: %d, want its sign-in page or a redirect to it", resp.StatusCode)
		}
	})
	t.Run("CreatePollLongPoll", func(t *testing.T) {
		resp, body := do("POST", "/v1/requests", bearer, `{"type":"image.test","context":{"n":1}}`)
		var created struct {
			ID        string `json:"id"`
			PollToken string `json:"poll_token"`
			Status    string `json:"status"`
		}
		if resp.StatusCode != 202 || json.Unmarshal(body, &created) != nil || created.PollToken == "" {
			t.Fatalf("create: %d %s", resp.StatusCode, body)
		}
		if loc := resp.Header.Get("Location"); loc != base+"/v1/requests/"+created.ID {
			t.Fatalf("create: Location %q", loc)
		}
		token := map[string]string{"X-Poll-Token": created.PollToken}
		resp, body = do("GET", "/v1/requests/"+created.ID, token, "")
		if resp.StatusCode != 200 || resp.Header.Get("ETag") != `"1"` || !strings.Contains(string(body), `"status":"queued"`) {
			t.Fatalf("poll: %d ETag %s %s", resp.StatusCode, resp.Header.Get("ETag"), body)
		}

		// A long poll held until the job reports progress.
		type answer struct {
			resp *http.Response
			body []byte
			took time.Duration
		}
		answered := make(chan answer, 1)
		began := time.Now()
		go func() {
			req, _ := http.NewRequest("GET", base+"/v1/requests/"+created.ID, nil)
			req.Header.Set("X-Poll-Token", created.PollToken)
			req.Header.Set("Prefer", "wait=15")
			req.Header.Set("If-None-Match", `"1"`)
			resp, err := client.Do(req)
			if err != nil {
				answered <- answer{}
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			answered <- answer{resp, b, time.Since(began)}
		}()
		time.Sleep(500 * time.Millisecond)
		select {
		case a := <-answered:
			t.Fatalf("the long poll answered before any change: %v %s", a.resp, a.body)
		default:
		}
		if resp, body := do("POST", "/v1/requests/"+created.ID+"/processing", bearer, `{"percent":40}`); resp.StatusCode != 200 {
			t.Fatalf("processing: %d %s", resp.StatusCode, body)
		}
		a := <-answered
		if a.resp == nil {
			t.Fatalf("the long poll failed")
		}
		if a.resp.StatusCode != 200 || a.resp.Header.Get("ETag") != `"2"` || a.resp.Header.Get("Preference-Applied") == "" ||
			!strings.Contains(string(a.body), `"percent":40`) {
			t.Fatalf("long poll: %d ETag %s Preference-Applied %q %s", a.resp.StatusCode, a.resp.Header.Get("ETag"),
				a.resp.Header.Get("Preference-Applied"), a.body)
		}
		if a.took >= 15*time.Second {
			t.Fatalf("the long poll answered after %s: at its timeout, not at the change", a.took)
		}
	})

	// SIGTERM: serve finishes and exits 0 (docs/reference.md §11).
	if err := serve.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Fatalf("serve after SIGTERM: %v, want exit status 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not exit within 30 s of SIGTERM")
	}
}

// TestReleaseReproducible builds one release target twice, from two clones
// of the checkout's HEAD at different paths, with `make release`, and
// compares the bytes. That proves the build depends on neither the source
// path nor the time, and that the version and VCS stamps are deterministic.
// Both builds share the Go build cache, so the packages are compiled once:
// the Go toolchain's compiler is itself reproducible (go.dev/blog/rebuild),
// which this test does not re-prove; with ASYNCSTATUS_TEST_REPRO_COLD=1 the
// second build gets an empty cache of its own (a full build, minutes).
func TestReleaseReproducible(t *testing.T) {
	repo := repoRoot(t)
	head, _ := gitHead(t, repo)
	if head == "" {
		head = strings.TrimSpace(runIn(t, repo, nil, "git", "rev-parse", "HEAD"))
	}
	target := "linux/" + runtime.GOARCH
	name := "asyncstatus-linux-" + runtime.GOARCH
	tmp := t.TempDir()
	var bins [][]byte
	var sums []string
	for i, dir := range []string{filepath.Join(tmp, "a", "src"), filepath.Join(tmp, "second-build", "x", "asyncstatus")} {
		runIn(t, tmp, nil, "git", "clone", "--quiet", "--shared", "--no-checkout", repo, dir)
		runIn(t, dir, nil, "git", "checkout", "--quiet", "--detach", head)
		var env []string
		if i == 1 && os.Getenv("ASYNCSTATUS_TEST_REPRO_COLD") == "1" {
			env = []string{"GOCACHE=" + filepath.Join(tmp, "gocache")}
		}
		start := time.Now()
		runIn(t, dir, env, "make", "--no-print-directory", "release", "RELEASE_PLATFORMS="+target, "VERSION=1.2.3-repro")
		t.Logf("make release (%s) in %s: %s", target, dir, time.Since(start).Round(100*time.Millisecond))
		bin, err := os.ReadFile(filepath.Join(dir, "dist", name))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(bin, []byte(dir)) || bytes.Contains(bin, []byte(tmp)) {
			t.Fatalf("%s contains its build path %s (-trimpath)", name, dir)
		}
		info := runIn(t, dir, nil, "go", "version", "-m", filepath.Join(dir, "dist", name))
		for _, want := range []string{"vcs.revision=" + head, "vcs.modified=false", "-trimpath=true", "CGO_ENABLED=0"} {
			if !strings.Contains(info, want) {
				t.Fatalf("go version -m %s lacks %s:\n%s", name, want, info)
			}
		}
		if !bytes.Contains(bin, []byte("1.2.3-repro")) {
			t.Fatalf("%s does not carry the stamped VERSION", name)
		}
		sum, err := os.ReadFile(filepath.Join(dir, "dist", "SHA256SUMS"))
		if err != nil {
			t.Fatal(err)
		}
		bins, sums = append(bins, bin), append(sums, string(sum))
	}
	if !bytes.Equal(bins[0], bins[1]) {
		t.Fatalf("two builds of %s at %s differ (%d and %d bytes): the release is not reproducible", target, head, len(bins[0]), len(bins[1]))
	}
	if sums[0] != sums[1] || !strings.Contains(sums[0], name) {
		t.Fatalf("SHA256SUMS differ or miss %s:\n%s\n%s", name, sums[0], sums[1])
	}
	t.Logf("%s: %d bytes, identical in both builds; %s", name, len(bins[0]), strings.TrimSpace(sums[0]))
}

// gitHead is the checkout's HEAD when the Go toolchain can stamp it (a .git
// directory: a linked worktree's .git is a file, and go build records no
// revision there), else "".
func gitHead(t *testing.T, repo string) (string, bool) {
	t.Helper()
	if fi, err := os.Stat(filepath.Join(repo, ".git")); err != nil || !fi.IsDir() {
		return "", false
	}
	return strings.TrimSpace(runIn(t, repo, nil, "git", "rev-parse", "HEAD")), true
}

// untar extracts archive into dir and returns its regular files and their
// sizes; it fails on anything but files and directories.
func untar(t *testing.T, archive, dir string) map[string]int64 {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]int64{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatalf("%s: %v", archive, err)
		}
		name := filepath.Clean(strings.TrimPrefix(h.Name, "/"))
		if name == "." {
			continue
		}
		if strings.HasPrefix(name, "..") {
			t.Fatalf("%s: entry %q leaves the archive", archive, h.Name)
		}
		p := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			out, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o777)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(out, tr); err != nil {
				t.Fatal(err)
			}
			out.Close()
			files[name] = h.Size
		default:
			t.Fatalf("the image holds %s of type %q: only the binary and the CA bundle belong there", h.Name, h.Typeflag)
		}
	}
}

func countCerts(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			t.Fatalf("%s: certificate %d: %v", path, n+1, err)
		}
		n++
	}
	if n < 50 || !x509.NewCertPool().AppendCertsFromPEM(mustRead(t, path)) {
		t.Fatalf("%s holds %d certificates: not a CA bundle", path, n)
	}
	return n
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// runChroot runs cmd and returns its stdout; it fails the test on an error.
func runChroot(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s%s", strings.Join(cmd.Args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// runWithin runs cmd, killing it after d, and returns its combined output.
func runWithin(t *testing.T, cmd *exec.Cmd, d time.Duration) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), err
	case <-time.After(d):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%s still running after %s, want it to refuse to start:\n%s", strings.Join(cmd.Args, " "), d, out.String())
		return "", nil
	}
}

// waitHealthy waits for url to answer 200, or serve to exit.
func waitHealthy(t *testing.T, url string, exited <-chan error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("serve exited before it answered %s: %v", url, err)
		case <-ctx.Done():
			t.Fatalf("%s did not answer 200 within 30 s", url)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
