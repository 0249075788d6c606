// Package problem is the one table of error codes: for each domain.Code, the
// HTTP status, title and problem type URI every face of the service answers
// it with (docs/reference.md §7). The API's problem+json writer and the
// console's refusal pages both read it, so the two cannot disagree. It
// imports only the domain.
package problem

import (
	"strings"

	"github.com/asyncstatus/asyncstatus/internal/domain"
)

// TypeBase prefixes the stable type URI of every problem code.
const TypeBase = "https://asyncstatus.dev/problems/"

// Info is how a code is answered.
type Info struct {
	Status int    // the HTTP status
	Title  string // the problem's title
	Type   string // the problem's type URI: TypeBase + the code in kebab case
}

// table is every code with its status, title and type.
var table = withTypes(map[domain.Code]Info{
	domain.ValidationFailed:     {Status: 400, Title: "Validation failed"},
	domain.InvalidCursor:        {Status: 400, Title: "Invalid cursor"},
	domain.Unauthenticated:      {Status: 401, Title: "Unauthenticated"},
	domain.Forbidden:            {Status: 403, Title: "Forbidden"},
	domain.TenantFrozen:         {Status: 403, Title: "Tenant frozen"},
	domain.NotFound:             {Status: 404, Title: "Not found"},
	domain.MethodNotAllowed:     {Status: 405, Title: "Method not allowed"},
	domain.NotAcceptable:        {Status: 406, Title: "Not acceptable"},
	domain.AlreadyTerminal:      {Status: 409, Title: "Request already terminal"},
	domain.PayloadTooLarge:      {Status: 413, Title: "Payload too large"},
	domain.UnsupportedMediaType: {Status: 415, Title: "Unsupported media type"},
	domain.IdempotencyKeyReused: {Status: 422, Title: "Idempotency key reused"},
	domain.PolledTooEarly:       {Status: 429, Title: "Polled too early"},
	domain.RateLimited:          {Status: 429, Title: "Rate limited"},
	domain.BackendUnavailable:   {Status: 503, Title: "Backend unavailable"},
	domain.Internal:             {Status: 500, Title: "Internal error"},
})

// withTypes fills in each code's type URI once, so that an answer builds none.
func withTypes(t map[domain.Code]Info) map[domain.Code]Info {
	for code, info := range t {
		info.Type = TypeBase + strings.ToLower(strings.ReplaceAll(string(code), "_", "-"))
		t[code] = info
	}
	return t
}

// For is how code is answered; an unknown code is answered as Internal, with
// Known false.
func For(code domain.Code) (info Info, known bool) {
	info, known = table[code]
	if !known {
		info = table[domain.Internal]
	}
	return info, known
}

// Codes lists every code of the table, for tests that walk them all.
func Codes() []domain.Code {
	out := make([]domain.Code, 0, len(table))
	for c := range table {
		out = append(out, c)
	}
	return out
}
