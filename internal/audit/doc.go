// Package audit hands the audit trail to a sink: every create, transition,
// heartbeat and delete, recorded by the store's scripts in the same step as the
// change, is written as one JSON line to the service's log, to a file of its
// own, or nowhere (audit.sink), by one replica, at least once
// (docs/operations.md, Audit trail). It imports only the domain package and
// declares the store calls it needs (Store).
package audit
