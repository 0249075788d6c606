package main

import (
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/config"
)

// TestRetentionBucketIsTheSweepInterval pins docs/reference.md §6's "index entries are cleaned
// within two sweep intervals": a terminal record waits in a retention bucket
// until the bucket ends, then at most one sweep interval more, so the bucket
// width must follow lifecycle.sweep_interval, whatever it is set to.
func TestRetentionBucketIsTheSweepInterval(t *testing.T) {
	for _, iv := range []time.Duration{time.Second, 10 * time.Second, 90 * time.Second} {
		cfg := config.Defaults()
		cfg.Lifecycle.SweepInterval = iv
		if got := storeOptions(cfg).RetentionBucket; got != iv {
			t.Errorf("sweep_interval %v: retention bucket %v", iv, got)
		}
	}
}

// TestAutoPipelineFollowsConfig: redis.autopipeline (on by default) reaches the
// store, and ASYNCSTATUS_REDIS_AUTOPIPELINE=false turns it off.
func TestAutoPipelineFollowsConfig(t *testing.T) {
	for env, want := range map[string]bool{"": true, "false": false, "true": true} {
		cfg, err := config.Load("", func(k string) string {
			if k == "ASYNCSTATUS_REDIS_AUTOPIPELINE" {
				return env
			}
			return ""
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := storeOptions(cfg).AutoPipeline; got != want {
			t.Errorf("ASYNCSTATUS_REDIS_AUTOPIPELINE=%q: store AutoPipeline %v, want %v", env, got, want)
		}
	}
}

// TestStoreOptionsResolveByType: the store gets every by_type setting resolved
// as config says an override inherits: a lifecycle override that sets one timer
// keeps the default of the other, a retention of 0 is "forever" for that type
// (not "the default"), and a schedule override replaces the whole schedule.
func TestStoreOptionsResolveByType(t *testing.T) {
	cfg := config.Defaults()
	cfg.Lifecycle.ByType = map[string]config.LifecycleOverride{
		"report.build": {QueuedTimeout: time.Hour}, "slow": {ProcessingTimeout: 2 * time.Hour}}
	cfg.Retention.ByType = map[string]time.Duration{"keep": 0, "short": time.Minute}
	cfg.Polling.ByType = map[string][]time.Duration{"statement.export": {5 * time.Second, 30 * time.Second}}
	o := storeOptions(cfg)
	for typ, want := range map[string][2]time.Duration{
		"report.build": {time.Hour, cfg.Lifecycle.ProcessingTimeout},
		"slow":         {cfg.Lifecycle.QueuedTimeout, 2 * time.Hour},
	} {
		if q, p := o.QueuedTimeoutByType[typ], o.ProcessingTimeoutByType[typ]; q != want[0] || p != want[1] {
			t.Errorf("%s: timeouts %v, %v; want %v, %v", typ, q, p, want[0], want[1])
		}
	}
	if d, ok := o.RetentionByType["keep"]; !ok || d != 0 || o.RetentionByType["short"] != time.Minute {
		t.Errorf("retention by type: %v", o.RetentionByType)
	}
	if s := o.ScheduleByType["statement.export"]; len(s) != 2 || s[0] != 5 || s[1] != 30 {
		t.Errorf("schedule by type: %v", o.ScheduleByType)
	}
}
