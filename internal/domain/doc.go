// Package domain holds what asyncstatus is about, independent of Redis and HTTP:
// the request model and its statuses, transitions, credentials, error codes and the
// validation of every input. internal/store (the Redis way) and internal/httpapi (the
// HTTP way) both import it; it imports neither, nor any other internal package.
package domain
