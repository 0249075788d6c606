package tracing

import (
	"sync"
	"sync/atomic"
)

// cache is a map written a few times (once per script, per route and
// status) and read on every span: readers load an immutable map without a
// lock, writers copy it. A sync.Map would take its key as an interface,
// which costs an allocation per lookup for a string or a struct key.
type cache[K comparable, V any] struct {
	m  atomic.Pointer[map[K]V]
	mu sync.Mutex // serializes writers
}

// get is k's value, made by mk the first time k is asked for.
func (c *cache[K, V]) get(k K, mk func(K) V) V {
	if m := c.m.Load(); m != nil {
		if v, ok := (*m)[k]; ok {
			return v
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil {
		if v, ok := (*old)[k]; ok {
			return v
		}
	}
	next := make(map[K]V, 1)
	if old != nil {
		next = make(map[K]V, len(*old)+1)
		for ok, ov := range *old {
			next[ok] = ov
		}
	}
	v := mk(k)
	next[k] = v
	c.m.Store(&next)
	return v
}
