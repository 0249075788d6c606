package httpapi

// OpenAPI returns a copy of the OpenAPI document served at /openapi.json, for
// the external tests that validate every route against it.
func OpenAPI() []byte { return append([]byte(nil), openapiJSON...) }
