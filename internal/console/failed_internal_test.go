package console

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/problem"
)

// TestFailedAnswersAsTheAPI: a store error reaches the console's refusal page
// with the status the API answers its code with (docs/reference.md §7), the
// codes the console once answered 500 included, and never a 500 for a code
// the table knows but Internal.
func TestFailedAnswersAsTheAPI(t *testing.T) {
	s, err := New(nil, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	reference := map[domain.Code]int{
		domain.MethodNotAllowed: 405, domain.NotAcceptable: 406, domain.PayloadTooLarge: 413,
		domain.UnsupportedMediaType: 415, domain.IdempotencyKeyReused: 422,
		domain.ValidationFailed: 400, domain.Forbidden: 403, domain.TenantFrozen: 403,
		domain.AlreadyTerminal: 409, domain.RateLimited: 429, domain.BackendUnavailable: 503,
	}
	for _, code := range problem.Codes() {
		if code == domain.NotFound { // the one not-found page, tested in TestPages
			continue
		}
		t.Run(string(code), func(t *testing.T) {
			w := httptest.NewRecorder()
			r := httptest.NewRequest(http.MethodGet, "/tenants/acme/requests", nil)
			s.failed(w, r, nil, domain.Errorf(code, "detail of %s", code))
			info, _ := problem.For(code)
			if w.Code != info.Status {
				t.Errorf("status %d, the API answers %d", w.Code, info.Status)
			}
			if want, ok := reference[code]; ok && w.Code != want {
				t.Errorf("status %d, docs/reference.md §7 says %d", w.Code, want)
			}
			if code != domain.Internal && w.Code == http.StatusInternalServerError {
				t.Errorf("a known code answered 500")
			}
			if body := w.Body.String(); !strings.Contains(body, string(code)) || !strings.Contains(body, fmt.Sprintf("detail of %s", code)) {
				t.Errorf("the page does not name the code and its detail:\n%s", body)
			}
		})
	}
}
