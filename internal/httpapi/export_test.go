package httpapi

// OpenAPI returns a copy of the OpenAPI document served at /openapi.json, for
// the external tests that validate every route against it.
func OpenAPI() []byte { return append([]byte(nil), openapiJSON...) }

// WithoutLRORoutes leaves the routes of docs/reference.md §15 out of a server,
// for the router-cost benchmark.
func WithoutLRORoutes(o *Options) { o.withoutLRO = true }
