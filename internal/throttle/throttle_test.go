package throttle

import (
	"sync"
	"testing"
	"time"
)

func TestThrottle(t *testing.T) {
	var th Throttle
	t0 := time.Unix(1_000_000, 0)
	if ok, n := th.Allow(t0); !ok || n != 0 {
		t.Fatalf("first line: %v %d", ok, n)
	}
	for i := range 3 {
		if ok, _ := th.Allow(t0.Add(time.Duration(i+1) * time.Second)); ok {
			t.Fatal("a second line within the minute")
		}
	}
	if ok, n := th.Allow(t0.Add(time.Minute)); !ok || n != 3 {
		t.Fatalf("after a minute: %v, suppressed %d (want 3)", ok, n)
	}
	if ok, _ := th.Allow(t0.Add(time.Minute + time.Second)); ok {
		t.Fatal("the period restarts at the last line")
	}
	short := Throttle{Every: 10 * time.Millisecond}
	short.Allow(t0)
	if ok, _ := short.Allow(t0.Add(10 * time.Millisecond)); !ok {
		t.Fatal("Every is not honoured")
	}
}

func TestThrottleConcurrent(t *testing.T) {
	var th Throttle
	now := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	allowed := 0
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ok, _ := th.Allow(now); ok {
				mu.Lock()
				allowed++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if allowed != 1 {
		t.Fatalf("%d lines let through at once, want 1", allowed)
	}
}
