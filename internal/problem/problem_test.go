package problem_test

import (
	"testing"

	"github.com/asyncstatus/asyncstatus/internal/domain"
	"github.com/asyncstatus/asyncstatus/internal/problem"
)

// TestTable: the statuses of docs/reference.md §7, the type URIs in kebab
// case, and an unknown code answered as an internal error.
func TestTable(t *testing.T) {
	want := map[domain.Code]int{
		domain.ValidationFailed: 400, domain.InvalidCursor: 400, domain.Unauthenticated: 401,
		domain.Forbidden: 403, domain.TenantFrozen: 403, domain.NotFound: 404, domain.MethodNotAllowed: 405,
		domain.NotAcceptable: 406, domain.AlreadyTerminal: 409, domain.PayloadTooLarge: 413,
		domain.UnsupportedMediaType: 415, domain.IdempotencyKeyReused: 422, domain.PolledTooEarly: 429,
		domain.RateLimited: 429, domain.BackendUnavailable: 503, domain.Internal: 500,
	}
	if len(problem.Codes()) != len(want) {
		t.Fatalf("%d codes in the table, %d in the reference", len(problem.Codes()), len(want))
	}
	for code, status := range want {
		info, known := problem.For(code)
		if !known || info.Status != status || info.Title == "" {
			t.Errorf("%s: %+v known %v, want status %d", code, info, known, status)
		}
	}
	if info, _ := problem.For(domain.AlreadyTerminal); info.Type != "https://asyncstatus.dev/problems/async-request-already-terminal" {
		t.Errorf("type %q", info.Type)
	}
	if info, known := problem.For("NO_SUCH_CODE"); known || info.Status != 500 || info.Type != problem.TypeBase+"internal" {
		t.Errorf("unknown code: %+v known %v", info, known)
	}
}
