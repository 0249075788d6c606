// Package console is the operator console of docs/reference.md §14: server-rendered pages
// (html/template, assets embedded with go:embed, no build step, no CDN) on a
// listener of their own, for the people who run asyncstatus.
//
// It speaks net/http rather than Fiber: it is a low-volume surface of forms,
// cookies, redirects and event streams, all of which the standard library
// does directly, and keeping it off the API's fasthttp server keeps the API's
// tuned hot path untouched (docs/console.md).
//
// It imports internal/domain, internal/problem's code table (so a refusal
// page has the status the API answers), internal/auth's tenant-name rule and
// internal/sse's event framing only (and the Prometheus client for the
// figures);
// the store and the authenticator come in through the Store and Authenticator
// interfaces, and cmd/asyncstatus wires them.
package console
