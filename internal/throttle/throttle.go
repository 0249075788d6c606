// Package throttle bounds how often a recurring condition is logged: a service
// whose Redis is away must say so, not flood its log with one line per attempt.
// It imports nothing of this module.
package throttle

import (
	"sync"
	"time"
)

// Throttle lets one log line through per period and counts the rest. The zero
// value allows one line a minute and is safe for concurrent use.
type Throttle struct {
	// Every is the period; zero means a minute.
	Every time.Duration

	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// Allow reports whether a line may be logged at now; when it may, suppressed is
// how many calls were held back since the previous line.
func (t *Throttle) Allow(now time.Time) (ok bool, suppressed int) {
	every := t.Every
	if every <= 0 {
		every = time.Minute
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.last.IsZero() && now.Sub(t.last) < every {
		t.suppressed++
		return false, 0
	}
	suppressed = t.suppressed
	t.last, t.suppressed = now, 0
	return true, suppressed
}
