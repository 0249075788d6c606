// Package load is the benchmark harness of asyncstatus (`make bench`, run by
// bench/cmd/bench): it builds asyncstatus and the baseline (bench/baseline), runs
// them on a redis-server of its own, drives them with a closed-loop HTTP load in
// rounds A B A B, measures Redis memory per reference request, and writes one
// markdown report. docs/performance.md says what each figure means.
//
// It starts processes and talks HTTP and Redis only: it never imports the service's
// packages, so it measures what a client sees and keeps working while they change.
//
// Files: run.go (configuration, start-up, preload), scenarios.go (the workloads and
// the round loop), client.go (the load generator), memory.go, profile.go (perf),
// procs.go (child processes, ports, CPU counters), report.go (figures and markdown).
package load
