package auth

import (
	"net/netip"
	"sync"
	"time"
)

// sourceBudget throttles, per source address, the lookups of API keys that
// pass their check and turn out unknown. A key of a legacy shape passes its
// check whenever its maker wants (the CRC is public), so without a budget
// each made-up key costs a Redis lookup, unauthenticated; the miss cache
// does not help, the ids being new each time. A source may have
// unknownBurst such lookups at once, then one per unknownEvery; past that its
// keys are refused unseen (401, as an unknown key) until the budget refills.
// A genuine key is spent nothing and, once cached, is never refused; one not
// cached yet is refused only while its source is out of budget, which takes a
// flood of unknown keys from the same address.
type sourceBudget struct {
	mu sync.Mutex
	m  map[netip.Addr]budget
}

type budget struct {
	spent float64 // lookups over the allowance, decaying by one per unknownEvery
	at    time.Time
}

const (
	unknownBurst = 20
	unknownEvery = time.Second
	maxSources   = 10_000
)

// sourceOf is the budget's key for addr: IPv6 clients are counted by /64,
// the block one subscriber is usually handed, so that walking through its
// addresses earns no new budget.
func sourceOf(addr netip.Addr) netip.Addr {
	addr = addr.Unmap()
	if addr.Is6() {
		p, _ := addr.Prefix(64)
		return p.Addr()
	}
	return addr
}

// allow reports whether source may have one more lookup now.
func (b *sourceBudget) allow(source netip.Addr, now time.Time) bool {
	source = sourceOf(source)
	b.mu.Lock()
	defer b.mu.Unlock()
	bu, ok := b.m[source]
	return !ok || bu.left(now) >= 1
}

// spend counts one unknown key of source.
func (b *sourceBudget) spend(source netip.Addr, now time.Time) {
	source = sourceOf(source)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[netip.Addr]budget{}
	}
	bu, ok := b.m[source]
	if !ok {
		if len(b.m) >= maxSources {
			for k, v := range b.m { // drop one source whose budget is whole again, else any
				if v.left(now) >= unknownBurst {
					delete(b.m, k)
					break
				}
			}
			for k := range b.m {
				if len(b.m) < maxSources {
					break
				}
				delete(b.m, k)
			}
		}
		bu = budget{at: now}
	}
	bu.spent = max(0, bu.spent-float64(now.Sub(bu.at))/float64(unknownEvery)) + 1
	bu.at = now
	b.m[source] = bu
}

// left is how many lookups the budget allows at now.
func (bu budget) left(now time.Time) float64 {
	return unknownBurst - max(0, bu.spent-float64(now.Sub(bu.at))/float64(unknownEvery))
}
