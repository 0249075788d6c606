package store_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/asyncstatus/asyncstatus/internal/store"
)

// TestEmbeddedBehavesLikeASocket: on the embedded store, a pipeline far larger
// than an in-memory pipe carries (64 KiB of commands, and replies as large) is
// written whole before its replies are read, and a subscriber that subscribes
// to more channels while announcements stream in to it gets every one; over
// unbuffered pipes both deadlock. Every step has a deadline, so a deadlock
// fails the test instead of hanging it.
func TestEmbeddedBehavesLikeASocket(t *testing.T) {
	e, err := store.NewEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	t.Run("pipeline of 64 KiB", func(t *testing.T) {
		value := strings.Repeat("v", 1024)
		const n = 64 // 64 SETs of 1 KiB, then 64 GETs answering 1 KiB each
		cmds := make([]*redis.StringCmd, n)
		_, err := e.Client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := range n {
				p.Set(ctx, fmt.Sprintf("k%d", i), value, 0)
			}
			for i := range n {
				cmds[i] = p.Get(ctx, fmt.Sprintf("k%d", i))
			}
			return nil
		})
		if err != nil {
			t.Fatalf("pipeline: %v", err)
		}
		for i, c := range cmds {
			if c.Val() != value {
				t.Fatalf("GET k%d: %d bytes, want %d", i, len(c.Val()), len(value))
			}
		}
	})

	t.Run("subscribe under announcements", func(t *testing.T) {
		ps := e.Client.Subscribe(ctx, "c0")
		defer ps.Close()
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatalf("subscribe: %v", err)
		}
		const channels, each = 32, 64
		payload := strings.Repeat("p", 512)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // announcements on c0 while the subscriber adds channels
			defer wg.Done()
			for range each {
				if err := e.Client.Publish(ctx, "c0", payload).Err(); err != nil {
					t.Errorf("publish: %v", err)
					return
				}
			}
		}()
		for i := 1; i < channels; i++ {
			if err := ps.Subscribe(ctx, fmt.Sprintf("c%d", i)); err != nil {
				t.Fatalf("subscribe c%d: %v", i, err)
			}
		}
		wg.Wait()
		for i := 1; i < channels; i++ {
			if err := e.Client.Publish(ctx, fmt.Sprintf("c%d", i), payload).Err(); err != nil {
				t.Fatalf("publish c%d: %v", i, err)
			}
		}
		got := map[string]int{}
		for total := 0; total < each+channels-1; {
			msg, err := ps.ReceiveTimeout(ctx, 5*time.Second)
			if err != nil {
				t.Fatalf("after %d messages (%v): %v", total, got, err)
			}
			if m, ok := msg.(*redis.Message); ok {
				if m.Payload != payload {
					t.Fatalf("message on %s: %d bytes", m.Channel, len(m.Payload))
				}
				got[m.Channel]++
				total++
			}
		}
		if got["c0"] != each || len(got) != channels {
			t.Fatalf("got %v: want %d on c0 and one on each of %d channels", got, each, channels-1)
		}
	})
}
