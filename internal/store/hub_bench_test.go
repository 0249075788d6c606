package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// BenchmarkChannelGranularity is the measurement behind one change channel
// per hash tag rather than per request (docs/design.md, Waiting), on a real
// redis-server:
//
//   - PerIDSubscription: what a channel per request costs each wait: a
//     SUBSCRIBE confirmed before the first read, an UNSUBSCRIBE after;
//
//   - SharedChannelNoise: what a shared channel costs instead: the hub
//     receives announcements of requests nobody on this replica waits for,
//     and drops them (one map lookup each).
//
//     go test -run XXX -bench BenchmarkChannelGranularity ./internal/store/
func BenchmarkChannelGranularity(b *testing.B) {
	b.Run("PerIDSubscription", func(b *testing.B) {
		rdb := redis.NewClient(&redis.Options{Addr: testenv.Redis(b)})
		defer rdb.Close()
		ps := rdb.Subscribe(ctx, "warm")
		defer ps.Close()
		if _, err := ps.Receive(ctx); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for i := range b.N {
			ch := fmt.Sprintf("as:{t}:w:%d", i)
			if err := ps.Subscribe(ctx, ch); err != nil {
				b.Fatal(err)
			}
			if _, err := ps.Receive(ctx); err != nil {
				b.Fatal(err)
			}
			if err := ps.Unsubscribe(ctx, ch); err != nil {
				b.Fatal(err)
			}
			if _, err := ps.Receive(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("SharedChannelNoise", func(b *testing.B) {
		f := newFixture(b, backends()[1], nil)
		h := newHub(b, f.s)
		watched := f.mustCreate(b, "acme", "export")
		wa, err := h.Watch(ctx, "acme", watched.ID)
		if err != nil {
			b.Fatal(err)
		}
		defer wa.Close()
		others := make([]*domain.Request, 200)
		for i := range others {
			others[i] = f.mustCreate(b, "acme", "export")
		}
		// the channel the scripts announce on, found from a real announcement
		sub := f.rdb.(*redis.Client).PSubscribe(ctx, f.prefix+":{acme}:*")
		defer sub.Close()
		if _, err := sub.Receive(ctx); err != nil {
			b.Fatal(err)
		}
		if _, err := f.s.MarkProcessing(ctx, tp("acme", others[0].ID), domain.ProgressInput{}); err != nil {
			b.Fatal(err)
		}
		m, err := sub.ReceiveMessage(ctx)
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		pipe := f.rdb.Pipeline()
		for i := range b.N {
			pipe.Publish(ctx, m.Channel, others[i%len(others)].ID+",2")
			if i%100 == 99 {
				if _, err := pipe.Exec(ctx); err != nil {
					b.Fatal(err)
				}
			}
		}
		if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
			b.Fatal(err)
		}
		// a last announcement for the watched id marks the end of the noise
		if _, err := f.s.MarkProcessing(ctx, tp("acme", watched.ID), domain.ProgressInput{}); err != nil {
			b.Fatal(err)
		}
		nextChange(b, wa, 1, 30*time.Second)
	})
}
