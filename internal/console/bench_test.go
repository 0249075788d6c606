package console_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/testenv"
)

// benchTenantSize is the tenant the requests page is measured on.
const benchTenantSize = 100_000

// BenchmarkRequestsPage measures the server time of the requests page (a page
// of 50, the counts and the oldest ages) for a tenant of 100k requests on a
// real redis-server, against the baseline of the one list call it makes
// (docs/reference.md §14: "a page of 50 requests renders in about the time of one list
// call"). The two alternate three times, so that a ratio compares runs made
// side by side on a shared machine. Run:
//
//	go test -run XXX -bench RequestsPage -benchtime 2s ./internal/console/
func BenchmarkRequestsPage(b *testing.B) {
	be := testenv.Backends()[1] // the real redis-server
	// the key cache as serve has it by default (auth.key_cache_ttl 10s)
	s := newStack(b, be, stackOptions{cacheTTL: 10 * time.Second})
	seed(b, s, "bench", benchTenantSize)
	admin, _ := s.key(b, "bench", adminScopes)
	c := s.mustSignIn(b, admin)
	var cookie *http.Cookie
	for _, ck := range c.hc.Jar.Cookies(mustURL(s.url)) {
		if ck.Name == "as_console" {
			cookie = ck
		}
	}
	h := s.console.Handler()
	for range 3 {
		b.Run("page", func(b *testing.B) {
			for b.Loop() {
				req := httptest.NewRequest(http.MethodGet, "/t/bench/requests", nil)
				req.AddCookie(cookie)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("status %d", w.Code)
				}
			}
		})
		b.Run("list-call-baseline", func(b *testing.B) {
			for b.Loop() {
				page, err := s.st.List(ctx, domain.ListFilter{Call: domain.Call{Tenant: "bench"}, Limit: 50})
				if err != nil || len(page.Items) != 50 {
					b.Fatalf("list: %v", err)
				}
			}
		})
	}
}

// seed creates n requests of one tenant through the store, from many
// goroutines at once, so that the autopipeliner sends them in batches: about
// a few seconds for 100k on a local redis-server.
func seed(tb testing.TB, s *stack, tenant string, n int) {
	tb.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				if _, _, err := s.st.Create(ctx, domain.CreateParams{
					Call:  domain.Call{Tenant: tenant, By: "key_seed"},
					Input: domain.CreateInput{Type: "statement.export"},
				}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatalf("seed: %v", err)
	}
}
