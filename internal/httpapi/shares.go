package httpapi

import (
	"sync"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// Wait slots (wait.max_waiters) are shared out: one tenant may hold at most
// wait.max_waiters_per_tenant of them and one credential (an API key, or the
// poll token of one request) wait.max_waiters_per_credential, so that a
// tenant, or one holder of a token, that opens waits as fast as it can fills
// its own share and not the replica: other tenants keep waiting. A wait past
// a share is answered as one past max_waiters: a long poll as an ordinary
// poll, a stream with the current state and its end.

// slot is one held wait: what its release gives back.
type slot struct {
	tenant, cred string // copies: the principal's strings may live in a request buffer
}

// waitShares counts the waits each tenant and credential holds.
type waitShares struct {
	mu      sync.Mutex
	tenants map[string]int
	creds   map[string]int
}

// holdSlot takes one of the MaxWaiters slots for the caller p, within its
// tenant's and credential's shares; nil when none may be had or the server
// is stopping.
func (s *Server) holdSlot(p domain.Principal) *slot {
	select {
	case <-s.stopping:
		return nil
	default:
	}
	if s.held.Add(1) > int64(s.opts.Wait.MaxWaiters) {
		s.held.Add(-1)
		return nil
	}
	perTenant, perCred := s.opts.Wait.MaxWaitersPerTenant, s.opts.Wait.MaxWaitersPerCredential
	if perTenant <= 0 && perCred <= 0 {
		return &slot{}
	}
	cred := "pt:" + p.Tenant + "/" + p.PollTokenFor
	if p.KeyID != "" {
		cred = p.KeyID
	}
	sh := &s.shares
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if perTenant > 0 && sh.tenants[p.Tenant] >= perTenant || perCred > 0 && sh.creds[cred] >= perCred {
		s.held.Add(-1)
		return nil
	}
	if sh.tenants == nil {
		sh.tenants, sh.creds = map[string]int{}, map[string]int{}
	}
	sl := &slot{tenant: p.Tenant, cred: cred} // the principal's own strings (authorize)
	sh.tenants[sl.tenant]++
	sh.creds[sl.cred]++
	return sl
}

// releaseSlot gives back a slot holdSlot gave.
func (s *Server) releaseSlot(sl *slot) {
	if sl.tenant != "" || sl.cred != "" {
		sh := &s.shares
		sh.mu.Lock()
		decrement(sh.tenants, sl.tenant)
		decrement(sh.creds, sl.cred)
		sh.mu.Unlock()
	}
	s.held.Add(-1)
}

// decrement counts one wait less for k, and forgets k at none, so that the
// maps hold only the tenants and credentials waiting now.
func decrement(m map[string]int, k string) {
	if n := m[k]; n > 1 {
		m[k] = n - 1
	} else {
		delete(m, k)
	}
}
