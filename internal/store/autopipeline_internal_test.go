package store

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// TestClusterIgnoresAutoPipeline pins New's choice: with Options.AutoPipeline
// a single server's calls ride the autopipeliner, a Cluster's never do (its
// slot-range queues let a dead master's calls hold the healthy masters' past
// their deadline; TestClusterFailover in internal/faults shows the effect).
func TestClusterIgnoresAutoPipeline(t *testing.T) {
	for _, b := range testenv.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			rdb := b.Client(t)
			s, err := New(rdb, Options{Prefix: testenv.Isolate(t), OpTimeout: 5 * time.Second, AutoPipeline: true})
			if err != nil {
				t.Fatal(err)
			}
			_, cluster := rdb.(*redis.ClusterClient)
			if cluster && s.ap != nil {
				t.Fatal("a Cluster store uses the autopipeliner")
			}
			if _, ok := rdb.(autoPipeliner); ok && !cluster && s.ap == nil {
				t.Fatal("a single server's store does not use the autopipeliner it was asked for")
			}
		})
	}
}
