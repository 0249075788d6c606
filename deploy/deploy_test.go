package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/asyncstatus/asyncstatus/internal/config"
	"github.com/asyncstatus/asyncstatus/internal/httpapi"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// What these tests prove: every deployment file names only configuration
// keys the service has, passes the configuration validation `serve` applies
// before it touches Redis (config.Load, and the poll-token secret rule; the
// webhook key's length rule lives in package main and is run by the image
// test, through the binary's own `config check`), probes paths the service
// routes on the port it listens on, and runs the image as the user and
// entrypoint the Containerfile declares. The Kubernetes manifests are decoded
// strictly against the subset of the Kubernetes schema they use (a misspelt
// field fails) and checked for the fields the API server requires; that is
// not the API server's own validation, which needs a cluster. The systemd
// unit goes through systemd-analyze verify and security.

// --- the service the files deploy ------------------------------------------

// readyStore is a store that is always ready; nothing else of it is called
// while routes are registered and probes answered.
type readyStore struct{ httpapi.Requests }

func (readyStore) CountsRateLimits(string) bool { return false }
func (readyStore) Ready(context.Context) error  { return nil }

// getRoutes is the set of GET paths the API serves, from the router itself:
// a probe must hit one of them. The probes' paths must also answer 200
// without credentials.
func getRoutes(t *testing.T) map[string]bool {
	t.Helper()
	srv := httpapi.New(readyStore{}, nil, nil, httpapi.Options{}, nil)
	routes := map[string]bool{}
	for _, r := range srv.App().GetRoutes(true) {
		if r.Method == "GET" {
			routes[r.Path] = true
		}
	}
	for _, p := range []string{"/healthz", "/readyz", livenessPath(routes)} {
		if !routes[p] {
			t.Fatalf("the API does not route GET %s any more; the deployment files probe it", p)
		}
		resp, err := srv.App().Test(httptest.NewRequest("GET", p, nil), -1)
		if err != nil {
			t.Fatalf("GET %s: %v", p, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s without credentials answers %d, want 200 (a probe sends none)", p, resp.StatusCode)
		}
	}
	return routes
}

// livenessPath is the path liveness probes use: /livez where the service has
// one (a liveness-only check), else /healthz.
func livenessPath(routes map[string]bool) string {
	if routes["/livez"] {
		return "/livez"
	}
	return "/healthz"
}

// image is what the Containerfile declares.
type image struct {
	user       string   // USER
	entrypoint []string // ENTRYPOINT (exec form)
	cmd        []string // CMD (exec form)
	expose     []string // EXPOSE
	copies     []string // COPY destinations
}

func readContainerfile(t *testing.T) image {
	t.Helper()
	data, err := os.ReadFile("../Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	var img image
	var from []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	var logical string
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || (line == "" && logical == "") {
			continue
		}
		if s, ok := strings.CutSuffix(line, "\\"); ok {
			logical += s + " "
			continue
		}
		logical += line
		instr, rest, _ := strings.Cut(strings.TrimSpace(logical), " ")
		rest = strings.TrimSpace(rest)
		logical = ""
		execForm := func() []string {
			var v []string
			if err := json.Unmarshal([]byte(rest), &v); err != nil {
				t.Fatalf("Containerfile: %s %s: want the exec form (a JSON array): %v", instr, rest, err)
			}
			return v
		}
		switch strings.ToUpper(instr) {
		case "FROM":
			from = append(from, rest)
		case "USER":
			img.user = rest
		case "ENTRYPOINT":
			img.entrypoint = execForm()
		case "CMD":
			img.cmd = execForm()
		case "EXPOSE":
			img.expose = append(img.expose, strings.Fields(rest)...)
		case "COPY":
			f := strings.Fields(rest)
			img.copies = append(img.copies, f[len(f)-1])
		}
	}
	if !slices.Equal(from, []string{"scratch"}) {
		t.Fatalf("Containerfile: FROM %q, want only scratch (no base image to pull)", from)
	}
	if len(img.entrypoint) != 1 || !slices.Contains(img.copies, img.entrypoint[0]) {
		t.Fatalf("Containerfile: ENTRYPOINT %q is not the one binary it copies (%q)", img.entrypoint, img.copies)
	}
	if !slices.Equal(img.cmd, []string{"serve"}) {
		t.Fatalf("Containerfile: CMD %q, want [serve]", img.cmd)
	}
	return img
}

// TestContainerfile: the image runs as a non-root numeric user, copies the CA
// bundle where Go looks for it, and exposes the port serve listens on by
// default.
func TestContainerfile(t *testing.T) {
	img := readContainerfile(t)
	uid, gid, ok := strings.Cut(img.user, ":")
	if u, err := strconv.Atoi(uid); err != nil || u == 0 || !ok || gid == "" || gid == "0" {
		t.Fatalf("Containerfile: USER %q, want a numeric non-root user:group", img.user)
	}
	if !slices.Contains(img.copies, "/etc/ssl/certs/ca-certificates.crt") {
		t.Fatalf("Containerfile copies %q: no CA bundle at /etc/ssl/certs/ca-certificates.crt (webhooks need it for TLS)", img.copies)
	}
	if want := port(t, config.Defaults().HTTP.Addr) + "/tcp"; !slices.Contains(img.expose, want) && !slices.Contains(img.expose, strings.TrimSuffix(want, "/tcp")) {
		t.Fatalf("Containerfile: EXPOSE %q does not include http.addr's default port %s", img.expose, want)
	}
}

// --- helpers ---------------------------------------------------------------

func port(t *testing.T, addr string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	return p
}

// checkEnvNames fails for every ASYNCSTATUS_* name that is no configuration
// key (config.UnknownEnv, the same check serve makes at start).
func checkEnvNames(t *testing.T, where string, names []string) {
	t.Helper()
	var environ []string
	for _, n := range names {
		if !strings.HasPrefix(n, config.EnvPrefix) {
			t.Errorf("%s: variable %s: every variable the service reads starts with %s", where, n, config.EnvPrefix)
		}
		environ = append(environ, n+"=x")
	}
	for _, w := range config.UnknownEnv(environ) {
		t.Errorf("%s: %s", where, w)
	}
}

// effectiveConfig is what serve would run with: the YAML file (none when
// yamlText is "") under the environment env, validated as config check does
// before it touches Redis.
func effectiveConfig(t *testing.T, where, yamlText string, env map[string]string) config.Config {
	t.Helper()
	path := ""
	if yamlText != "" {
		path = filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(path, []byte(yamlText), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Load(path, func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("%s: the configuration does not pass config check: %v", where, err)
	}
	if err := cfg.RequirePollTokenSecret(); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	if cfg.Embedded() {
		t.Fatalf("%s: no Redis configured: serve would run the embedded store, whose data dies with the process", where)
	}
	if cfg.Webhooks.Enabled && env[config.EnvName("webhooks.secret_key")] == "" && cfg.Webhooks.SecretKey == "" {
		t.Fatalf("%s: webhooks are on and %s is not set: serve refuses to start", where, config.EnvName("webhooks.secret_key"))
	}
	return cfg
}

// readEnvFile reads NAME=value lines, as systemd's EnvironmentFile and
// Compose's env_file do for the simple form the example files use.
func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.ContainsAny(k, " \t") {
			t.Fatalf("%s:%d: not NAME=value: %q", path, i+1, line)
		}
		env[k] = v
	}
	return env
}

// decodeStrict decodes every YAML document of data into a fresh T, refusing
// fields T does not have.
func decodeStrict[T any](t *testing.T, path string, data []byte) []T {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var out []T
	for {
		var v T
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, v)
	}
}

func durationOf(t *testing.T, where, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("%s: %q is not a duration: %v", where, s, err)
	}
	return d
}
