// Package domain holds what asyncstatus is about, independent of Redis and HTTP:
// the request model, its statuses and the rule of which status may follow which
// (Status.CanBecome), credentials, error codes, the validated inputs and their
// limits. internal/store (the Redis way), internal/wire (the JSON of the HTTP
// API) and internal/httpapi (the HTTP way) import it; it imports none of them,
// nor any other internal package.
package domain
