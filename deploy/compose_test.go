package deploy_test

import (
	"bufio"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/asyncstatus/asyncstatus/internal/config"
)

// The subset of the Compose specification compose.yaml uses, refusing any
// other field (a misspelt key fails here, not silently in `compose up`).
type composeFile struct {
	Name     string                    `yaml:"name"`
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Deploy  struct {
		Replicas int `yaml:"replicas"`
	} `yaml:"deploy"`
	EnvFile     []string          `yaml:"env_file"`
	Environment map[string]string `yaml:"environment"`
	Expose      []string          `yaml:"expose"`
	Ports       []string          `yaml:"ports"`
	Volumes     []string          `yaml:"volumes"`
	DependsOn   any               `yaml:"depends_on"`
	Healthcheck *struct {
		Test        []string `yaml:"test"`
		Interval    string   `yaml:"interval"`
		Timeout     string   `yaml:"timeout"`
		Retries     int      `yaml:"retries"`
		StartPeriod string   `yaml:"start_period"`
	} `yaml:"healthcheck"`
	StopGracePeriod string   `yaml:"stop_grace_period"`
	ReadOnly        bool     `yaml:"read_only"`
	User            string   `yaml:"user"`
	CapDrop         []string `yaml:"cap_drop"`
	SecurityOpt     []string `yaml:"security_opt"`
	Restart         string   `yaml:"restart"`
}

// TestCompose checks compose.yaml and haproxy.cfg against the service: Redis
// as the service needs it, two replicas behind the published port, health
// checks on real routes and ports, secrets from the env file.
func TestCompose(t *testing.T) {
	const path = "compose/compose.yaml"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f := decodeStrict[composeFile](t, path, data)[0]
	routes := getRoutes(t)
	img := readContainerfile(t)

	app, ok := f.Services["asyncstatus"]
	if !ok {
		t.Fatalf("%s: no asyncstatus service", path)
	}
	if app.Deploy.Replicas < 2 {
		t.Errorf("%s: asyncstatus has %d replicas, want 2", path, app.Deploy.Replicas)
	}
	if len(app.Ports) != 0 {
		t.Errorf("%s: asyncstatus publishes %q: replicas cannot share a host port; the proxy publishes it", path, app.Ports)
	}

	// The environment: the env file (shipped as <name>.example) for the
	// secrets, the service's environment for the rest.
	env := map[string]string{}
	var names []string
	for _, ef := range app.EnvFile {
		example := filepath.Join("compose", ef+".example")
		for k, v := range readEnvFile(t, example) {
			env[k] = v
			names = append(names, k)
		}
	}
	for _, k := range []string{"auth.poll_token_secret", "webhooks.secret_key"} {
		if _, inline := app.Environment[config.EnvName(k)]; inline {
			t.Errorf("%s: %s is written in compose.yaml; secrets come from the env file", path, config.EnvName(k))
		}
		if env[config.EnvName(k)] == "" {
			t.Errorf("%s: the env file example does not set %s", path, config.EnvName(k))
		}
	}
	for k, v := range app.Environment {
		env[k] = v
		names = append(names, k)
	}
	checkEnvNames(t, path+" asyncstatus", names)
	cfg := effectiveConfig(t, path+" asyncstatus", "", env)
	httpPort := port(t, cfg.HTTP.Addr)
	if !slices.Contains(app.Expose, httpPort) {
		t.Errorf("%s: asyncstatus exposes %q, serve listens on %s", path, app.Expose, httpPort)
	}
	if stop := durationOf(t, path+" stop_grace_period", app.StopGracePeriod); stop <= cfg.HTTP.ShutdownTimeout {
		t.Errorf("%s: stop_grace_period %s must exceed http.shutdown_timeout %s", path, stop, cfg.HTTP.ShutdownTimeout)
	}
	if app.User != img.user || !app.ReadOnly || !slices.Contains(app.CapDrop, "ALL") {
		t.Errorf("%s: asyncstatus must run as the image's user %s, read-only, with every capability dropped", path, img.user)
	}

	// Its health check: the image's own binary asking a real route on the
	// port serve listens on.
	hc := app.Healthcheck
	if hc == nil || len(hc.Test) < 5 || hc.Test[0] != "CMD" || hc.Test[1] != img.entrypoint[0] || hc.Test[2] != "healthcheck" || hc.Test[3] != "--url" {
		t.Fatalf("%s: asyncstatus healthcheck %v, want [CMD %s healthcheck --url URL]", path, hc, img.entrypoint[0])
	}
	u, err := url.Parse(hc.Test[4])
	if err != nil {
		t.Fatalf("%s: healthcheck URL: %v", path, err)
	}
	if !routes[u.Path] || u.Port() != httpPort || u.Hostname() != "127.0.0.1" {
		t.Errorf("%s: healthcheck GET %s: want a route of the API on 127.0.0.1:%s", path, u, httpPort)
	}

	// Redis as docs/operations.md requires it.
	redis, ok := f.Services["redis"]
	if !ok {
		t.Fatalf("%s: no redis service", path)
	}
	flag := func(name string) string {
		i := slices.Index(redis.Command, "--"+name)
		if i < 0 || i+1 >= len(redis.Command) {
			return ""
		}
		return redis.Command[i+1]
	}
	if flag("appendonly") != "yes" || flag("maxmemory-policy") != "noeviction" {
		t.Errorf("%s: redis runs %q: want --appendonly yes and --maxmemory-policy noeviction", path, redis.Command)
	}
	if ru, err := url.Parse(cfg.Redis.URL); err != nil || ru.Hostname() != "redis" {
		t.Errorf("%s: redis.url %q does not point at the redis service", path, cfg.Redis.URL)
	}
	if redis.Healthcheck == nil || !slices.Contains(redis.Healthcheck.Test, "ping") {
		t.Errorf("%s: redis needs a health check (asyncstatus waits for it)", path)
	}

	// The proxy: publishes a port and balances over the replicas, checking
	// the same readiness route on the same port.
	proxy, ok := f.Services["proxy"]
	if !ok || len(proxy.Ports) == 0 {
		t.Fatalf("%s: no proxy service publishing a port", path)
	}
	var cfgMount string
	for _, v := range proxy.Volumes {
		if src, _, ok := strings.Cut(v, ":"); ok && strings.HasSuffix(src, "haproxy.cfg") {
			cfgMount = filepath.Join("compose", src)
		}
	}
	if cfgMount == "" {
		t.Fatalf("%s: the proxy mounts no haproxy.cfg", path)
	}
	checkHAProxy(t, cfgMount, routes, httpPort)
}

// checkHAProxy reads the lines of haproxy.cfg the test can check: the health
// check's path and the servers' port.
func checkHAProxy(t *testing.T, path string, routes map[string]bool, httpPort string) {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	var checkPath, serverAddr string
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) >= 4 && f[0] == "option" && f[1] == "httpchk":
			checkPath = f[3]
		case len(f) >= 4 && f[0] == "server-template":
			serverAddr = f[3]
		}
	}
	if checkPath != "/readyz" || !routes[checkPath] {
		t.Errorf("%s: option httpchk GET %q, want /readyz (only ready replicas get traffic)", path, checkPath)
	}
	host, p, _ := strings.Cut(serverAddr, ":")
	if host != "asyncstatus" || p != httpPort {
		t.Errorf("%s: servers at %q, want asyncstatus:%s", path, serverAddr, httpPort)
	}
	if _, err := strconv.Atoi(p); err != nil {
		t.Errorf("%s: server port %q: %v", path, p, err)
	}
}
