package config

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// shippedFile is the documented example configuration, relative to this package.
const shippedFile = "../../configs/asyncstatus.yaml"

// env returns a getenv over a fixed set of variables.
func env(vars map[string]string) func(string) string {
	return func(name string) string { return vars[name] }
}

// writeFile writes a YAML file into a fresh temp dir and returns its path.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "asyncstatus.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// wantErr fails unless err is non-nil and mentions every want.
func wantErr(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one mentioning %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
}

func TestDefaultsValid(t *testing.T) {
	c := Defaults()
	if err := c.Validate(); err != nil {
		t.Fatalf("Defaults() invalid: %v", err)
	}
	if !c.Embedded() {
		t.Error("Defaults() should use the embedded store")
	}
	if err := c.RequirePollTokenSecret(); err != nil {
		t.Errorf("embedded store must not require a poll token secret: %v", err)
	}
}

func TestDefaultsFreshSlices(t *testing.T) {
	a := Defaults()
	a.Polling.Schedule[0] = time.Hour
	a.Webhooks.RetrySchedule[0] = time.Hour
	b := Defaults()
	if b.Polling.Schedule[0] != time.Second || b.Webhooks.RetrySchedule[0] != 5*time.Second {
		t.Fatal("Defaults() shares slices between calls")
	}
}

func TestLoadWithoutFileOrEnv(t *testing.T) {
	got, err := Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, Defaults()) {
		t.Errorf("Load(\"\", nil) = %+v, want Defaults()", got)
	}
}

func TestShippedFileIsDefaults(t *testing.T) {
	got, err := Load(shippedFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := Defaults(); !reflect.DeepEqual(got, want) {
		t.Errorf("%s loads to\n%+v\nwant Defaults()\n%+v", shippedFile, got, want)
	}
}

// TestShippedFileDocumentsEveryKey keeps the example file complete as fields
// are added: each key must appear, and each overridable one with its
// environment variable.
func TestShippedFileDocumentsEveryKey(t *testing.T) {
	data, err := os.ReadFile(shippedFile)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	c := Defaults()
	walkKeys(reflect.ValueOf(&c).Elem(), "", func(key string, v reflect.Value) {
		leaf := key[strings.LastIndex(key, ".")+1:]
		if !strings.Contains(text, "  "+leaf+":") {
			t.Errorf("%s does not show key %s", shippedFile, key)
		}
		if v.Kind() != reflect.Map && !strings.Contains(text, "env: "+EnvName(key)) {
			t.Errorf("%s does not name %s for %s", shippedFile, EnvName(key), key)
		}
	})
}

func TestEnvNamesUnique(t *testing.T) {
	seen := map[string]string{}
	c := Defaults()
	walkKeys(reflect.ValueOf(&c).Elem(), "", func(key string, _ reflect.Value) {
		name := EnvName(key)
		if other, ok := seen[name]; ok {
			t.Errorf("%s and %s share the variable %s", key, other, name)
		}
		seen[name] = key
	})
	if len(seen) < 40 {
		t.Errorf("walked only %d keys; walkKeys is missing some", len(seen))
	}
}

func TestLoadYAMLApplied(t *testing.T) {
	path := writeFile(t, `
# comments are fine
redis:
  url: rediss://:pw@redis.internal:6380/2
  key_prefix: prod
  wait_replicas: 1
http:
  addr: "127.0.0.1:9090"
  public_url: https://status.example.com
polling:
  schedule: 2s,4s           # a comma list string works as in the environment
  by_type:
    statement.export: [5s, 30s]
  early_tolerance: 0.5
ratelimit:
  enabled: false
  read: 100-m
lifecycle:
  processing_timeout: 2h
  by_type:
    report.build:
      queued_timeout: 1h
retention:
  terminal: 0               # bare 0: keep forever
  by_type:
    audit.log: 8760h
webhooks:
  retry_schedule:
    - 1s
    - 1m
log:
  format: text
  level:                    # no value keeps the default
`)
	got, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Defaults()
	want.Redis.URL = "rediss://:pw@redis.internal:6380/2"
	want.Redis.KeyPrefix = "prod"
	want.Redis.WaitReplicas = 1
	want.HTTP.Addr = "127.0.0.1:9090"
	want.HTTP.PublicURL = "https://status.example.com"
	want.Polling.Schedule = []time.Duration{2 * time.Second, 4 * time.Second}
	want.Polling.ByType = map[string][]time.Duration{"statement.export": {5 * time.Second, 30 * time.Second}}
	want.Polling.EarlyTolerance = 0.5
	want.RateLimit.Enabled = false
	want.RateLimit.Read = "100-m"
	want.Lifecycle.ProcessingTimeout = 2 * time.Hour
	want.Lifecycle.ByType = map[string]LifecycleOverride{"report.build": {QueuedTimeout: time.Hour}}
	want.Retention.Terminal = 0
	want.Retention.ByType = map[string]time.Duration{"audit.log": 8760 * time.Hour}
	want.Webhooks.RetrySchedule = []time.Duration{time.Second, time.Minute}
	want.Log.Format = "text"
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%+v\nwant\n%+v", got, want)
	}
}

func TestLoadEmptyFile(t *testing.T) {
	for _, content := range []string{"", "# only a comment\n", "---\n"} {
		got, err := Load(writeFile(t, content), nil)
		if err != nil {
			t.Errorf("%q: %v", content, err)
			continue
		}
		if !reflect.DeepEqual(got, Defaults()) {
			t.Errorf("%q: got %+v, want Defaults()", content, got)
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"), nil)
	wantErr(t, err, "nope.yaml")
}

func TestLoadYAMLRejected(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown top-level key", "redsi:\n  url: x\n", []string{"redsi", "unknown key", "line 1"}},
		{"unknown nested key", "redis:\n  key_prefix: as\n  ulr: redis://x\n", []string{"redis.ulr", "unknown key", "line 3"}},
		{"unknown key in by_type override", "lifecycle:\n  by_type:\n    a:\n      timeout: 1s\n", []string{"lifecycle.by_type[a].timeout", "unknown key"}},
		{"duplicate key", "log:\n  level: info\n  level: debug\n", []string{"log.level", "twice"}},
		{"duration without unit", "lifecycle:\n  processing_timeout: 15\n", []string{"lifecycle.processing_timeout", "invalid duration"}},
		{"bad list element", "polling:\n  schedule: [1s, soon]\n", []string{"polling.schedule[1]", "invalid duration"}},
		{"bad int", "limits:\n  context_bytes: 4k\n", []string{"limits.context_bytes", "invalid integer"}},
		{"bad bool", "ratelimit:\n  enabled: maybe\n", []string{"ratelimit.enabled", "invalid boolean"}},
		{"bad float", "polling:\n  early_tolerance: lots\n", []string{"polling.early_tolerance", "invalid number"}},
		{"mapping for scalar", "http:\n  addr:\n    port: 1\n", []string{"http.addr", "single value"}},
		{"scalar for section", "redis: localhost\n", []string{"redis", "mapping"}},
		{"list for map", "retention:\n  by_type: [1s]\n", []string{"retention.by_type", "mapping"}},
		{"top level not a mapping", "- a\n- b\n", []string{"top level", "mapping"}},
		{"two documents", "log:\n  level: info\n---\nlog:\n  level: debug\n", []string{"more than one"}},
		{"syntax error", "redis: [\n", []string{"yaml"}},
		{"invalid after decoding", "log:\n  level: loud\n", []string{"log.level"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, tt.yaml)
			_, err := Load(path, nil)
			wantErr(t, err, tt.want...)
		})
	}
}

func TestEnvOverrides(t *testing.T) {
	tests := []struct {
		kind string
		vars map[string]string
		want func(*Config)
	}{
		{"string", map[string]string{"ASYNCSTATUS_REDIS_URL": "redis://localhost:6379/0"},
			func(c *Config) { c.Redis.URL = "redis://localhost:6379/0" }},
		{"string kept verbatim", map[string]string{"ASYNCSTATUS_HTTP_ADDR": ":9000"},
			func(c *Config) { c.HTTP.Addr = ":9000" }},
		{"duration", map[string]string{
			"ASYNCSTATUS_LIFECYCLE_PROCESSING_TIMEOUT": "1h30m",
			"ASYNCSTATUS_LIFECYCLE_SWEEP_INTERVAL":     " 250ms ",
		}, func(c *Config) {
			c.Lifecycle.ProcessingTimeout = 90 * time.Minute
			c.Lifecycle.SweepInterval = 250 * time.Millisecond
		}},
		{"bare zero duration", map[string]string{"ASYNCSTATUS_RETENTION_TERMINAL": "0"},
			func(c *Config) { c.Retention.Terminal = 0 }},
		{"duration list", map[string]string{"ASYNCSTATUS_POLLING_SCHEDULE": "1s, 2s,5s"},
			func(c *Config) { c.Polling.Schedule = []time.Duration{time.Second, 2 * time.Second, 5 * time.Second} }},
		{"string list", map[string]string{"ASYNCSTATUS_REDIS_CLUSTER_ADDRS": "a:1,b:2"},
			func(c *Config) { c.Redis.ClusterAddrs = []string{"a:1", "b:2"} }},
		{"bool", map[string]string{"ASYNCSTATUS_RATELIMIT_ENABLED": "false"},
			func(c *Config) { c.RateLimit.Enabled = false }},
		{"int", map[string]string{"ASYNCSTATUS_LIFECYCLE_SWEEP_BATCH": "50"},
			func(c *Config) { c.Lifecycle.SweepBatch = 50 }},
		{"float", map[string]string{"ASYNCSTATUS_POLLING_EARLY_TOLERANCE": "0.5"},
			func(c *Config) { c.Polling.EarlyTolerance = 0.5 }},
		{"empty means unset", map[string]string{"ASYNCSTATUS_LOG_LEVEL": ""},
			func(*Config) {}},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			got, err := Load("", env(tt.vars))
			if err != nil {
				t.Fatal(err)
			}
			want := Defaults()
			tt.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}

func TestEnvBeatsFile(t *testing.T) {
	path := writeFile(t, "log:\n  level: debug\n  format: text\n")
	got, err := Load(path, env(map[string]string{"ASYNCSTATUS_LOG_LEVEL": "warn"}))
	if err != nil {
		t.Fatal(err)
	}
	if got.Log.Level != "warn" || got.Log.Format != "text" {
		t.Errorf("log = %+v, want level from env and format from file", got.Log)
	}
}

func TestEnvRejected(t *testing.T) {
	tests := []struct {
		name, value string
		want        []string
	}{
		{"ASYNCSTATUS_LIFECYCLE_SWEEP_INTERVAL", "10", []string{"lifecycle.sweep_interval", "ASYNCSTATUS_LIFECYCLE_SWEEP_INTERVAL", "invalid duration"}},
		{"ASYNCSTATUS_POLLING_SCHEDULE", "1s,,5s", []string{"polling.schedule", "empty"}},
		{"ASYNCSTATUS_POLLING_SCHEDULE", "1s,x", []string{"polling.schedule", "element 2"}},
		{"ASYNCSTATUS_RATELIMIT_ENABLED", "nope", []string{"ratelimit.enabled", "invalid boolean"}},
		{"ASYNCSTATUS_HTTP_BODY_LIMIT_BYTES", "1.5", []string{"http.body_limit_bytes", "invalid integer"}},
		{"ASYNCSTATUS_POLLING_EARLY_TOLERANCE", "half", []string{"polling.early_tolerance", "invalid number"}},
		// Parses, but Validate refuses it: still named by key.
		{"ASYNCSTATUS_POLLING_SCHEDULE", "1s,90s", []string{"polling.schedule: step 1m30s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			_, err := Load("", env(map[string]string{tt.name: tt.value}))
			wantErr(t, err, tt.want...)
		})
	}
}

func TestValidateRejects(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		key    string // every reported problem must start with key + ":"
	}{
		{"redis.url scheme", func(c *Config) { c.Redis.URL = "http://localhost:6379" }, "redis.url"},
		{"tracing.otlp_endpoint not a URL", func(c *Config) { c.Tracing.OTLPEndpoint = "collector:4318" }, "tracing.otlp_endpoint"},
		{"tracing.sample_ratio above 1", func(c *Config) { c.Tracing.SampleRatio = 1.5 }, "tracing.sample_ratio"},
		{"tracing.sample_ratio negative", func(c *Config) { c.Tracing.SampleRatio = -0.1 }, "tracing.sample_ratio"},
		{"tracing.service_name empty", func(c *Config) { c.Tracing.ServiceName = "" }, "tracing.service_name"},
		{"redis.url no scheme", func(c *Config) { c.Redis.URL = "localhost:6379" }, "redis.url"},
		{"redis.url no host", func(c *Config) { c.Redis.URL = "redis://" }, "redis.url"},
		{"redis.url unparsable", func(c *Config) { c.Redis.URL = "redis://u:pw@host:port" }, "redis.url"},
		{"url and cluster", func(c *Config) { c.Redis.URL = "redis://h:1"; c.Redis.ClusterAddrs = []string{"a:1"} }, "redis"},
		{"cluster and sentinel", func(c *Config) {
			c.Redis.ClusterAddrs = []string{"a:1"}
			c.Redis.SentinelMaster = "m"
			c.Redis.SentinelAddrs = []string{"s:1"}
		}, "redis"},
		{"sentinel_master without addrs", func(c *Config) { c.Redis.SentinelMaster = "mymaster" }, "redis.sentinel_addrs"},
		{"sentinel_addrs without master", func(c *Config) { c.Redis.SentinelAddrs = []string{"s:26379"} }, "redis.sentinel_master"},
		{"sentinel addr not host:port", func(c *Config) { c.Redis.SentinelMaster = "m"; c.Redis.SentinelAddrs = []string{"s"} }, "redis.sentinel_addrs"},
		{"cluster addr not host:port", func(c *Config) { c.Redis.ClusterAddrs = []string{"a:1", "b"} }, "redis.cluster_addrs"},
		{"key_prefix empty", func(c *Config) { c.Redis.KeyPrefix = "" }, "redis.key_prefix"},
		{"key_prefix hash tag", func(c *Config) { c.Redis.KeyPrefix = "{as}" }, "redis.key_prefix"},
		{"op_timeout 0", func(c *Config) { c.Redis.OpTimeout = 0 }, "redis.op_timeout"},
		{"pool_size negative", func(c *Config) { c.Redis.PoolSize = -1 }, "redis.pool_size"},
		{"wait_replicas negative", func(c *Config) { c.Redis.WaitReplicas = -1 }, "redis.wait_replicas"},
		{"tenant_shards negative", func(c *Config) { c.Redis.TenantShards = -1 }, "redis.tenant_shards"},
		{"tenant_shards 257", func(c *Config) { c.Redis.TenantShards = 257 }, "redis.tenant_shards"},
		{"wait_timeout 0 with replicas", func(c *Config) { c.Redis.WaitReplicas = 1; c.Redis.WaitTimeout = 0 }, "redis.wait_timeout"},
		{"wait_timeout negative", func(c *Config) { c.Redis.WaitTimeout = -time.Second }, "redis.wait_timeout"},
		{"schedule empty", func(c *Config) { c.Polling.Schedule = nil }, "polling.schedule"},
		{"schedule step too long", func(c *Config) { c.Polling.Schedule = []time.Duration{90 * time.Second} }, "polling.schedule"},
		{"schedule step fractional", func(c *Config) { c.Polling.Schedule = []time.Duration{1500 * time.Millisecond} }, "polling.schedule"},
		{"schedule step zero", func(c *Config) { c.Polling.Schedule = []time.Duration{0, time.Second} }, "polling.schedule"},
		{"by_type schedule step", func(c *Config) {
			c.Polling.ByType = map[string][]time.Duration{"statement.export": {time.Second, 2 * time.Minute}}
		}, "polling.by_type[statement.export]"},
		{"by_type schedule empty", func(c *Config) { c.Polling.ByType = map[string][]time.Duration{"a": {}} }, "polling.by_type[a]"},
		{"polling by_type bad type", func(c *Config) {
			c.Polling.ByType = map[string][]time.Duration{"Statement": {time.Second}}
		}, "polling.by_type[Statement]"},
		{"early_tolerance 1", func(c *Config) { c.Polling.EarlyTolerance = 1 }, "polling.early_tolerance"},
		{"early_tolerance negative", func(c *Config) { c.Polling.EarlyTolerance = -0.1 }, "polling.early_tolerance"},
		{"early_tolerance NaN", func(c *Config) { c.Polling.EarlyTolerance = math.NaN() }, "polling.early_tolerance"},
		{"rate without period", func(c *Config) { c.RateLimit.Read = "50" }, "ratelimit.read"},
		{"rate bad limit", func(c *Config) { c.RateLimit.Write = "x-S" }, "ratelimit.write"},
		{"rate zero", func(c *Config) { c.RateLimit.Admin = "0-S" }, "ratelimit.admin"},
		{"rate bad period", func(c *Config) { c.RateLimit.Tenant = "5-W" }, "ratelimit.tenant"},
		{"rate signed", func(c *Config) { c.RateLimit.Read = "+5-S" }, "ratelimit.read"},
		{"rate negative", func(c *Config) { c.RateLimit.Read = "-5-S" }, "ratelimit.read"},
		{"rate empty", func(c *Config) { c.RateLimit.Read = "" }, "ratelimit.read"},
		{"rate checked when disabled", func(c *Config) { c.RateLimit.Enabled = false; c.RateLimit.Read = "lots" }, "ratelimit.read"},
		{"ratelimit.timeout 0", func(c *Config) { c.RateLimit.Timeout = 0 }, "ratelimit.timeout"},
		{"queued_timeout 0", func(c *Config) { c.Lifecycle.QueuedTimeout = 0 }, "lifecycle.queued_timeout"},
		{"processing_timeout negative", func(c *Config) { c.Lifecycle.ProcessingTimeout = -time.Minute }, "lifecycle.processing_timeout"},
		{"lifecycle by_type bad type", func(c *Config) {
			c.Lifecycle.ByType = map[string]LifecycleOverride{"-x": {QueuedTimeout: time.Hour}}
		}, "lifecycle.by_type[-x]"},
		{"lifecycle by_type negative", func(c *Config) {
			c.Lifecycle.ByType = map[string]LifecycleOverride{"x": {ProcessingTimeout: -time.Hour}}
		}, "lifecycle.by_type[x].processing_timeout"},
		{"sweep_interval too short", func(c *Config) { c.Lifecycle.SweepInterval = 50 * time.Millisecond }, "lifecycle.sweep_interval"},
		{"sweep_batch 0", func(c *Config) { c.Lifecycle.SweepBatch = 0 }, "lifecycle.sweep_batch"},
		{"retention negative", func(c *Config) { c.Retention.Terminal = -time.Hour }, "retention.terminal"},
		{"retention by_type bad type", func(c *Config) {
			c.Retention.ByType = map[string]time.Duration{strings.Repeat("a", 65): time.Hour}
		}, "retention.by_type[" + strings.Repeat("a", 65) + "]"},
		{"retention by_type negative", func(c *Config) { c.Retention.ByType = map[string]time.Duration{"a": -1} }, "retention.by_type[a]"},
		{"idempotency.ttl 0", func(c *Config) { c.Idempotency.TTL = 0 }, "idempotency.ttl"},
		{"context_bytes 0", func(c *Config) { c.Limits.ContextBytes = 0 }, "limits.context_bytes"},
		{"result_bytes negative", func(c *Config) { c.Limits.ResultBytes = -1 }, "limits.result_bytes"},
		{"body_limit_bytes 0", func(c *Config) { c.HTTP.BodyLimitBytes = 0 }, "http.body_limit_bytes"},
		{"cors origin with path", func(c *Config) { c.HTTP.CORS.AllowedOrigins = []string{"https://a.example/x"} }, "http.cors.allowed_origins"},
		{"cors origin without scheme", func(c *Config) { c.HTTP.CORS.AllowedOrigins = []string{"a.example"} }, "http.cors.allowed_origins"},
		{"cors origin trailing slash", func(c *Config) { c.HTTP.CORS.AllowedOrigins = []string{"https://a.example/"} }, "http.cors.allowed_origins"},
		{"wait.max 0", func(c *Config) { c.Wait.Max = 0 }, "wait.max"},
		{"wait.max fractional", func(c *Config) { c.Wait.Max = 1500 * time.Millisecond }, "wait.max"},
		{"wait.max_waiters negative", func(c *Config) { c.Wait.MaxWaiters = -1 }, "wait.max_waiters"},
		{"wait.heartbeat 0", func(c *Config) { c.Wait.Heartbeat = 0 }, "wait.heartbeat"},
		{"wait.stream_max 0", func(c *Config) { c.Wait.StreamMax = 0 }, "wait.stream_max"},
		{"http.addr", func(c *Config) { c.HTTP.Addr = "8080" }, "http.addr"},
		{"public_url relative", func(c *Config) { c.HTTP.PublicURL = "/status" }, "http.public_url"},
		{"public_url scheme", func(c *Config) { c.HTTP.PublicURL = "ftp://status.example.com" }, "http.public_url"},
		{"public_url no host", func(c *Config) { c.HTTP.PublicURL = "https:///x" }, "http.public_url"},
		{"public_url query", func(c *Config) { c.HTTP.PublicURL = "https://status.example.com/?a=1" }, "http.public_url"},
		{"public_url fragment", func(c *Config) { c.HTTP.PublicURL = "https://status.example.com/#x" }, "http.public_url"},
		{"trusted_proxies not an address", func(c *Config) { c.HTTP.TrustedProxies = []string{"10.0.0.1", "proxy.local"} }, "http.trusted_proxies"},
		{"trusted_proxies bad range", func(c *Config) { c.HTTP.TrustedProxies = []string{"10.0.0.0/33"} }, "http.trusted_proxies"},
		{"max_waiters_per_tenant negative", func(c *Config) { c.Wait.MaxWaitersPerTenant = -1 }, "wait.max_waiters_per_tenant"},
		{"max_waiters_per_credential negative", func(c *Config) { c.Wait.MaxWaitersPerCredential = -1 }, "wait.max_waiters_per_credential"},
		{"key_check_secret short", func(c *Config) { c.Auth.KeyCheckSecret = "short" }, "auth.key_check_secret"},
		{"read_timeout negative", func(c *Config) { c.HTTP.ReadTimeout = -1 }, "http.read_timeout"},
		{"shutdown_timeout negative", func(c *Config) { c.HTTP.ShutdownTimeout = -1 }, "http.shutdown_timeout"},
		{"log.format", func(c *Config) { c.Log.Format = "xml" }, "log.format"},
		{"log.level", func(c *Config) { c.Log.Level = "trace" }, "log.level"},
		{"runtime.max_procs negative", func(c *Config) { c.Runtime.MaxProcs = -1 }, "runtime.max_procs"},
		{"poll_token_secret short", func(c *Config) { c.Auth.PollTokenSecret = strings.Repeat("s", 31) }, "auth.poll_token_secret"},
		{"key_cache_ttl negative", func(c *Config) { c.Auth.KeyCacheTTL = -time.Second }, "auth.key_cache_ttl"},
		{"webhooks.timeout 0", func(c *Config) { c.Webhooks.Timeout = 0 }, "webhooks.timeout"},
		{"webhooks.retry_schedule empty", func(c *Config) { c.Webhooks.RetrySchedule = nil }, "webhooks.retry_schedule"},
		{"webhooks.retry_schedule step 0", func(c *Config) { c.Webhooks.RetrySchedule = []time.Duration{time.Second, 0} }, "webhooks.retry_schedule"},
		{"audit.sink", func(c *Config) { c.Audit.Sink = "syslog" }, "audit.sink"},
		{"audit.file missing", func(c *Config) { c.Audit.Sink = "file" }, "audit.file"},
		{"audit.file_max_bytes 0", func(c *Config) { c.Audit.FileMaxBytes = 0 }, "audit.file_max_bytes"},
		{"audit.file_keep negative", func(c *Config) { c.Audit.FileKeep = -1 }, "audit.file_keep"},
		{"audit.max_backlog 0", func(c *Config) { c.Audit.MaxBacklog = 0 }, "audit.max_backlog"},
		{"audit.claim_after 0", func(c *Config) { c.Audit.ClaimAfter = 0 }, "audit.claim_after"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Defaults()
			tt.mutate(&c)
			err := c.Validate()
			if err == nil {
				t.Fatalf("Validate() = nil, want an error about %s", tt.key)
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, tt.key+": ") {
					t.Errorf("problem %q is not about %s", line, tt.key)
				}
			}
		})
	}
}

func TestValidateExample(t *testing.T) {
	c := Defaults()
	c.Polling.Schedule = []time.Duration{time.Second, 90 * time.Second}
	err := c.Validate()
	want := "polling.schedule: step 1m30s is not a whole number of seconds between 1s and 60s"
	if err == nil || err.Error() != want {
		t.Errorf("Validate() = %v, want %q", err, want)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	c := Defaults()
	c.Log.Level = "loud"
	c.Redis.OpTimeout = 0
	c.Limits.ContextBytes = 0
	wantErr(t, c.Validate(), "log.level", "redis.op_timeout", "limits.context_bytes")
}

func TestValidateAcceptsEdges(t *testing.T) {
	c := Defaults()
	c.Redis.URL = "rediss://user:pw@redis.example.com:6380/1"
	c.Redis.WaitReplicas = 2
	c.Redis.PoolSize = 0
	c.Redis.TenantShards = 256
	c.HTTP.Addr = ":0"
	c.HTTP.PublicURL = "https://api.example.com/status/"
	c.HTTP.ReadTimeout = 0
	c.Auth.PollTokenSecret = strings.Repeat("s", 32)
	c.Auth.KeyCacheTTL = 0
	c.Polling.Schedule = []time.Duration{time.Second, time.Minute}
	c.Polling.ByType = map[string][]time.Duration{"0a._-z": {60 * time.Second}, strings.Repeat("a", 64): {time.Second}}
	c.Polling.EarlyTolerance = 0
	c.RateLimit.Read = "100-m"
	c.RateLimit.Write = "1-H"
	c.RateLimit.Admin = "1-d"
	c.Lifecycle.SweepInterval = 100 * time.Millisecond
	c.Lifecycle.ByType = map[string]LifecycleOverride{"x": {}}
	c.Retention.Terminal = 0
	c.Retention.ByType = map[string]time.Duration{"x": 0}
	c.Log = Log{Format: "text", Level: "debug"}
	c.HTTP.CORS.AllowedOrigins = []string{"*", "https://app.example.com", "http://localhost:3000", "http://[::1]:8080"}
	c.Wait = Wait{Max: time.Second, MaxWaiters: 0, Heartbeat: time.Millisecond, StreamMax: time.Second, ReplayWindow: time.Second, ReplayEntries: 1}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}

	s := Defaults()
	s.Redis.SentinelMaster = "mymaster"
	s.Redis.SentinelAddrs = []string{"s1:26379", "[::1]:26379"}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestValidateDoesNotLeakRedisPassword: url.Parse errors quote the whole URL.
func TestValidateDoesNotLeakRedisPassword(t *testing.T) {
	c := Defaults()
	c.Redis.URL = "redis://user:hunter2-secret@host:port/0"
	err := c.Validate()
	wantErr(t, err, "redis.url")
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error leaks the password: %v", err)
	}
}

func TestRequirePollTokenSecret(t *testing.T) {
	c := Defaults()
	if err := c.RequirePollTokenSecret(); err != nil {
		t.Errorf("embedded: %v", err)
	}
	for _, set := range []func(*Config){
		func(c *Config) { c.Redis.URL = "redis://localhost:6379" },
		func(c *Config) { c.Redis.ClusterAddrs = []string{"a:1"} },
		func(c *Config) { c.Redis.SentinelMaster = "m"; c.Redis.SentinelAddrs = []string{"s:1"} },
	} {
		c := Defaults()
		set(&c)
		wantErr(t, c.RequirePollTokenSecret(), "auth.poll_token_secret", "ASYNCSTATUS_AUTH_POLL_TOKEN_SECRET")
		c.Auth.PollTokenSecret = strings.Repeat("k", 32)
		if err := c.RequirePollTokenSecret(); err != nil {
			t.Errorf("with secret: %v", err)
		}
	}
}

// redis.tenant_shards, when not set, spreads on a Cluster and is 1
// elsewhere; what is set wins, 1 on a Cluster too (an upgrade's rollout).
func TestTenantShards(t *testing.T) {
	c := Defaults()
	if c.Redis.TenantShards != 0 || c.Redis.Shards() != 1 {
		t.Fatalf("default: %d, resolved %d; want 0 and 1 (embedded store)", c.Redis.TenantShards, c.Redis.Shards())
	}
	c.Redis.URL = "redis://localhost:6379"
	if c.Redis.Shards() != 1 {
		t.Fatalf("single Redis: %d", c.Redis.Shards())
	}
	c.Redis.SentinelMaster, c.Redis.URL = "mymaster", ""
	if c.Redis.Shards() != 1 {
		t.Fatalf("Sentinel: %d", c.Redis.Shards())
	}
	c.Redis.SentinelMaster, c.Redis.ClusterAddrs = "", []string{"a:1", "b:2"}
	if c.Redis.Shards() != 16 {
		t.Fatalf("cluster, not set: %d, want 16", c.Redis.Shards())
	}
	c.Redis.TenantShards = 1
	if c.Redis.Shards() != 1 {
		t.Fatalf("cluster with 1 set: %d", c.Redis.Shards())
	}
	c.Redis.TenantShards = 32
	if c.Redis.Shards() != 32 {
		t.Fatalf("cluster with 32 set: %d", c.Redis.Shards())
	}
}

func TestScheduleFor(t *testing.T) {
	p := Defaults().Polling
	p.ByType = map[string][]time.Duration{"slow": {10 * time.Second}, "empty": nil}
	if got := p.ScheduleFor("slow"); !reflect.DeepEqual(got, []time.Duration{10 * time.Second}) {
		t.Errorf("slow: %v", got)
	}
	for _, typ := range []string{"other", "empty"} {
		if got := p.ScheduleFor(typ); !reflect.DeepEqual(got, p.Schedule) {
			t.Errorf("%s: %v, want the global schedule", typ, got)
		}
	}
}

func TestRetentionFor(t *testing.T) {
	r := Retention{Terminal: time.Hour, ByType: map[string]time.Duration{"keep": 0, "short": time.Minute}}
	for typ, want := range map[string]time.Duration{"keep": 0, "short": time.Minute, "other": time.Hour} {
		if got := r.For(typ); got != want {
			t.Errorf("For(%q) = %v, want %v", typ, got, want)
		}
	}
}

func TestTimeoutsFor(t *testing.T) {
	l := Defaults().Lifecycle
	l.ByType = map[string]LifecycleOverride{
		"both":  {QueuedTimeout: time.Hour, ProcessingTimeout: time.Minute},
		"queue": {QueuedTimeout: time.Hour},
	}
	tests := []struct {
		typ               string
		queued, processed time.Duration
	}{
		{"both", time.Hour, time.Minute},
		{"queue", time.Hour, 15 * time.Minute},
		{"other", 24 * time.Hour, 15 * time.Minute},
	}
	for _, tt := range tests {
		q, p := l.TimeoutsFor(tt.typ)
		if q != tt.queued || p != tt.processed {
			t.Errorf("TimeoutsFor(%q) = %v, %v; want %v, %v", tt.typ, q, p, tt.queued, tt.processed)
		}
	}
}

func TestMasked(t *testing.T) {
	secrets := []string{"redispw-AAA", "nodepw-BBB", "polltoken-CCC-0123456789abcdef0123", "webhookkey-DDD", "oldkey-EEE", "olderkey-FFF"}
	c := Defaults()
	c.Redis.URL = "redis://admin:" + secrets[0] + "@redis.example.com:6379/0?password=" + secrets[0]
	c.Redis.Password = secrets[1]
	c.Auth.PollTokenSecret = secrets[2]
	c.Webhooks.SecretKey = secrets[3]
	c.Webhooks.PreviousSecretKeys = []string{secrets[4], secrets[5]}
	orig := c
	// Its own copy: masking in place would change a shared slice unseen.
	orig.Webhooks.PreviousSecretKeys = slices.Clone(c.Webhooks.PreviousSecretKeys)

	m := c.Masked()
	if !reflect.DeepEqual(c, orig) {
		t.Error("Masked modified its receiver")
	}
	out, err := m.YAML()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets {
		if strings.Contains(string(out), s) {
			t.Errorf("masked output shows secret %q:\n%s", s, out)
		}
	}
	if want := "redis://admin:***@redis.example.com:6379/0?password=***"; m.Redis.URL != want {
		t.Errorf("redis.url = %q, want %q", m.Redis.URL, want)
	}
	if m.Redis.Password != "***" || m.Auth.PollTokenSecret != "***" || m.Webhooks.SecretKey != "***" ||
		!slices.Equal(m.Webhooks.PreviousSecretKeys, []string{"***", "***"}) {
		t.Errorf("secrets not masked: %+v %+v %+v", m.Redis, m.Auth, m.Webhooks)
	}

	// Every other key is left alone.
	m.Redis.URL, m.Redis.Password = orig.Redis.URL, orig.Redis.Password
	m.Auth.PollTokenSecret, m.Webhooks.SecretKey = orig.Auth.PollTokenSecret, orig.Webhooks.SecretKey
	m.Webhooks.PreviousSecretKeys = orig.Webhooks.PreviousSecretKeys
	if !reflect.DeepEqual(m, orig) {
		t.Errorf("Masked changed more than the secrets")
	}
}

func TestMaskedURLs(t *testing.T) {
	tests := map[string]string{
		"":                               "",
		"redis://localhost:6379":         "redis://localhost:6379",
		"redis://user@localhost:6379":    "redis://user@localhost:6379",
		"redis://:pw@localhost:6379":     "redis://:***@localhost:6379",
		"rediss://u:p%40ss@h:1/2":        "rediss://u:***@h:1/2",
		"redis://u:secret@host:notaport": "***",
	}
	for in, want := range tests {
		c := Defaults()
		c.Redis.URL = in
		if got := c.Masked().Redis.URL; got != want {
			t.Errorf("mask(%q) = %q, want %q", in, got, want)
		}
	}
	c := Defaults()
	if m := c.Masked(); m.Redis.Password != "" || m.Auth.PollTokenSecret != "" || m.Webhooks.SecretKey != "" {
		t.Error("unset secrets should stay empty so that they show as unset")
	}
}

func TestYAMLRoundTrip(t *testing.T) {
	c := Defaults()
	c.Redis.ClusterAddrs = []string{"a:1", "b:2"}
	c.Redis.Password = "p: #w'\"d"
	c.Redis.KeyPrefix = "true"
	c.HTTP.Addr = "[::1]:8080"
	c.HTTP.PublicURL = "https://status.example.com/base"
	c.Auth.PollTokenSecret = strings.Repeat("0", 32)
	c.Auth.KeyCacheTTL = 0
	c.Polling.Schedule = []time.Duration{time.Second, 60 * time.Second}
	c.Polling.ByType = map[string][]time.Duration{"b.type": {3 * time.Second}, "a-type": {time.Second, 2 * time.Second}}
	c.Polling.EarlyTolerance = 0.25
	c.RateLimit.Enabled = false
	c.Lifecycle.ProcessingTimeout = 90 * time.Minute
	c.Lifecycle.ByType = map[string]LifecycleOverride{"x": {ProcessingTimeout: 2 * time.Hour}}
	c.Retention.Terminal = 0
	c.Retention.ByType = map[string]time.Duration{"keep": 0, "short": 36*time.Hour + 1500*time.Millisecond}
	c.Webhooks.RetrySchedule = []time.Duration{1500 * time.Millisecond, time.Hour + time.Second}
	c.Webhooks.AllowHTTP = true
	c.Webhooks.SecretKey = "123"
	c.Log.Format = "text"

	for name, cfg := range map[string]Config{"defaults": Defaults(), "custom": c} {
		t.Run(name, func(t *testing.T) {
			out, err := cfg.YAML()
			if err != nil {
				t.Fatal(err)
			}
			got, err := Load(writeFile(t, string(out)), nil)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if !reflect.DeepEqual(got, cfg) {
				t.Errorf("round trip changed the config:\n%s\ngot  %+v\nwant %+v", out, got, cfg)
			}
		})
	}
}

func TestYAMLShortDurations(t *testing.T) {
	out, err := Defaults().YAML()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"processing_timeout: 15m\n", "queued_timeout: 24h\n", "terminal: 720h\n",
		"schedule: [1s, 2s, 5s, 10s, 30s]\n", "op_timeout: 1s\n", "wait_timeout: 500ms\n",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	tests := map[time.Duration]string{
		0:                                   "0s",
		500 * time.Millisecond:              "500ms",
		90 * time.Second:                    "1m30s",
		15 * time.Minute:                    "15m",
		time.Hour:                           "1h",
		time.Hour + 10*time.Minute:          "1h10m",
		time.Hour + time.Second:             "1h0m1s",
		720 * time.Hour:                     "720h",
		-2 * time.Hour:                      "-2h",
		time.Minute + 1500*time.Microsecond: "1m0.0015s",
	}
	for d, want := range tests {
		got := formatDuration(d)
		if got != want {
			t.Errorf("formatDuration(%d) = %q, want %q", d, got, want)
		}
		if back, err := parseDuration(got); err != nil || back != d {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", got, back, err, d)
		}
	}
}

func TestParseRate(t *testing.T) {
	tests := []struct {
		in     string
		limit  int64
		period time.Duration
		ok     bool
	}{
		{"100-S", 100, time.Second, true},
		{"5000-M", 5000, time.Minute, true},
		{"1-h", 1, time.Hour, true},
		{"7-D", 7, 24 * time.Hour, true},
		{"100", 0, 0, false},
		{"-S", 0, 0, false},
		{"0-S", 0, 0, false},
		{"1.5-S", 0, 0, false},
		{"1-S-S", 0, 0, false},
		{"1-W", 0, 0, false},
		{" 1-S", 0, 0, false},
		{"99999999999999999999-S", 0, 0, false},
	}
	for _, tt := range tests {
		limit, period, err := parseRate(tt.in)
		if (err == nil) != tt.ok || limit != tt.limit || period != tt.period {
			t.Errorf("parseRate(%q) = %d, %v, %v", tt.in, limit, period, err)
		}
	}
}

// TestConsoleKeys: the console is on by default on loopback; "" and "off"
// turn it off (an environment variable cannot say ""); a malformed address
// or a non-positive session TTL stops the program naming the key.
func TestConsoleKeys(t *testing.T) {
	c := Defaults()
	if !c.Console.Enabled() || c.Console.Addr != "127.0.0.1:8081" || c.Console.SessionTTL != 8*time.Hour {
		t.Fatalf("defaults: %+v", c.Console)
	}
	for _, off := range []string{"", "off"} {
		c.Console.Addr = off
		if c.Console.Enabled() || c.Validate() != nil {
			t.Errorf("console.addr %q: enabled=%v err=%v", off, c.Console.Enabled(), c.Validate())
		}
	}
	c.Console.Addr, c.Console.SessionTTL = "nowhere", 0
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "console.addr") || !strings.Contains(err.Error(), "console.session_ttl") {
		t.Fatalf("bad console keys: %v", err)
	}
	got, err := Load("", func(k string) string { return map[string]string{"ASYNCSTATUS_CONSOLE_ADDR": "off"}[k] })
	if err != nil || got.Console.Enabled() {
		t.Fatalf("ASYNCSTATUS_CONSOLE_ADDR=off: %+v %v", got.Console, err)
	}
}

// TestTracingFromEnv: the tracing keys are configuration keys (their
// variables are known, so serve does not refuse them), off by default, and
// the endpoint's password is masked when printed.
func TestTracingFromEnv(t *testing.T) {
	d := Defaults()
	if d.Tracing.OTLPEndpoint != "" || d.Tracing.SampleRatio != 1 || d.Tracing.ServiceName != "asyncstatus" {
		t.Fatalf("defaults %+v", d.Tracing)
	}
	vars := map[string]string{"ASYNCSTATUS_TRACING_OTLP_ENDPOINT": "https://u:pw-SECRET@collector:4318",
		"ASYNCSTATUS_TRACING_SAMPLE_RATIO": "0.25", "ASYNCSTATUS_TRACING_SERVICE_NAME": "status"}
	var environ []string
	for k, v := range vars {
		environ = append(environ, k+"="+v)
	}
	if p := UnknownEnv(environ); len(p) > 0 {
		t.Fatalf("unknown: %v", p)
	}
	c, err := Load("", env(vars))
	if err != nil {
		t.Fatal(err)
	}
	if c.Tracing.OTLPEndpoint != "https://u:pw-SECRET@collector:4318" || c.Tracing.SampleRatio != 0.25 || c.Tracing.ServiceName != "status" {
		t.Fatalf("loaded %+v", c.Tracing)
	}
	if m := c.Masked(); strings.Contains(m.Tracing.OTLPEndpoint, "pw-SECRET") {
		t.Errorf("masked endpoint %q", m.Tracing.OTLPEndpoint)
	}
}
