package main

import (
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/config"
)

// TestRetentionBucketIsTheSweepInterval pins spec §6's "index entries are cleaned
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
