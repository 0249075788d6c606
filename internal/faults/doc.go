// Package faults holds the fault tests of docs/reference.md §11: the service, built from
// cmd/asyncstatus and run as a child process exactly as in production, is driven
// over HTTP while the tests pause, kill and restart real redis-server processes
// and fail over a Redis Cluster of its own. Every test owns its Redis processes;
// none touches the shared servers of internal/testenv ([testenv.Redis],
// [testenv.Cluster]) that other packages use.
//
// What the tests check, and the figures they log (503 windows, acknowledged
// writes lost), are described in docs/operations.md.
//
// The package has no non-test code; it imports nothing of the service but
// internal/testenv: the service is a black box reached over HTTP.
package faults
