package config

import (
	"errors"
	"strings"
	"testing"
)

// TestLoadNamesEveryProblemAtOnce: the file's problems (two unknown keys, one
// of them a likely typo, and a bad value), the environment's and the values'
// (serve's missing secrets among them) come in one error, each once, under a
// single "configuration:" prefix.
func TestLoadNamesEveryProblemAtOnce(t *testing.T) {
	path := writeFile(t, "redis:\n  ulr: redis://x:1\n  url: redis://127.0.0.1:1/0\nmetric:\n  addr: :9090\nlog:\n  level: loud\n")
	_, err := LoadServe(path, env(map[string]string{"ASYNCSTATUS_HTTP_READ_TIMEOUT": "soon"}))
	var p *Problems
	if !errors.As(err, &p) {
		t.Fatalf("LoadServe: %v, want *Problems", err)
	}
	want := []string{
		"line 2: redis.ulr: unknown key; did you mean redis.url?",
		"line 4: metric: unknown key; did you mean metrics?",
		"http.read_timeout (from ASYNCSTATUS_HTTP_READ_TIMEOUT): invalid duration",
		"log.level: must be debug, info, warn or error",
		"auth.poll_token_secret: required when Redis is configured",
		"webhooks.secret_key: required when Redis is configured",
	}
	msg := err.Error()
	if len(*p) != len(want) || !strings.HasPrefix(msg, "configuration: 6 problems:\n  ") {
		t.Fatalf("%d problems, want %d:\n%s", len(*p), len(want), msg)
	}
	for _, w := range want {
		if strings.Count(msg, w) != 1 {
			t.Errorf("the error does not name %q once:\n%s", w, msg)
		}
	}
	if strings.Count(msg, "configuration:") != 1 || strings.Contains(msg, "config:") {
		t.Errorf("the prefix repeats:\n%s", msg)
	}

	// Load (the admin commands) does without serve's secrets.
	_, err = Load(path, nil)
	if err == nil || strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "configuration: 3 problems") {
		t.Errorf("Load: %v, want the three problems of the file and no secret", err)
	}
	// One problem reads as one line.
	_, err = Load(writeFile(t, "log:\n  levle: debug\n"), nil)
	if err == nil || err.Error() != "configuration: config file "+filepathOf(t, err)+": line 2: log.levle: unknown key; did you mean log.level?" {
		t.Errorf("one problem: %v", err)
	}
}

// filepathOf is the file an error of Load names ("config file F: ...").
func filepathOf(t *testing.T, err error) string {
	t.Helper()
	_, rest, _ := strings.Cut(err.Error(), "config file ")
	f, _, _ := strings.Cut(rest, ": ")
	return f
}

// TestServeSecretsEveryProblem: each secret serve needs is named when missing
// or too short, all at once, and never echoed.
func TestServeSecretsEveryProblem(t *testing.T) {
	c := Defaults()
	c.Redis.URL = "redis://127.0.0.1:1/0"
	c.Auth.PollTokenSecret = ""
	c.Webhooks.PreviousSecretKeys = []string{"old-and-short", strings.Repeat("p", 32)}
	wantErr(t, c.ValidateServe(), "auth.poll_token_secret: required", "webhooks.previous_secret_keys: set only with webhooks.secret_key",
		"webhooks.previous_secret_keys: key 1 of 2 must be at least 32 bytes")

	c.Webhooks.SecretKey = "short-seal-key"
	err := c.ValidateServe()
	wantErr(t, err, "auth.poll_token_secret", "webhooks.secret_key: must be at least 32 bytes, got 14")
	if strings.Contains(err.Error(), "short-seal-key") || strings.Contains(err.Error(), "old-and-short") {
		t.Fatalf("a secret is echoed: %v", err)
	}

	// The embedded store makes its own; webhooks off need no key.
	c = Defaults()
	if err := c.ValidateServe(); err != nil {
		t.Fatalf("embedded: %v", err)
	}
	c.Redis.URL = "redis://127.0.0.1:1/0"
	c.Auth.PollTokenSecret = strings.Repeat("s", 32)
	c.Webhooks.Enabled = false
	if err := c.ValidateServe(); err != nil {
		t.Fatalf("webhooks off: %v", err)
	}
}

// TestAPIAddr: the embedded store keeps a host-less http.addr on loopback; a
// named host, or Redis configured, is taken as written.
func TestAPIAddr(t *testing.T) {
	for _, c := range []struct{ addr, redis, want string }{
		{":8080", "", "127.0.0.1:8080"},
		{":0", "", "127.0.0.1:0"},
		{"0.0.0.0:8080", "", "0.0.0.0:8080"},
		{"[::1]:8080", "", "[::1]:8080"},
		{":8080", "redis://r:6379/0", ":8080"},
		{"10.0.0.5:80", "redis://r:6379/0", "10.0.0.5:80"},
	} {
		cfg := Defaults()
		cfg.HTTP.Addr, cfg.Redis.URL = c.addr, c.redis
		if got := cfg.APIAddr(); got != c.want {
			t.Errorf("http.addr %q, redis.url %q: APIAddr %q, want %q", c.addr, c.redis, got, c.want)
		}
	}
}

// TestMetricsAddr: metrics.addr is a [host]:port when set.
func TestMetricsAddr(t *testing.T) {
	c := Defaults()
	c.Metrics.Addr = "9090"
	wantErr(t, c.Validate(), "metrics.addr")
	c.Metrics.Addr = "127.0.0.1:9090"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}
