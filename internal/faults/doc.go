// Package faults holds the fault-injection tests of the module: each one runs the real webhook
// or payments handler, with the Redis client the functions build in production
// (redisconn.Open), against real redis-server processes that are stopped, restarted, slowed
// down, cut off, filled up or failed over while duplicate deliveries keep arriving.
//
// The package has no code of its own; everything is in its tests:
//
//	TestRedisRestartDuringDuplicateStream          Redis stopped and restarted, with and without persistence
//	TestKilledEnvironmentClaimExpiresThenRetryExecutesOnce  an environment dies mid-work
//	TestSlowRedisDeadlinesHold                     latency, dropped connections and a blackhole
//	TestClusterMasterKilledUnderLoad               a Redis Cluster master killed while load runs (Unix)
//	TestMemoryPressureEviction                     maxmemory with allkeys-lru, volatile-lru, volatile-ttl and noeviction
//	TestPausedOwner                                a real process stopped (SIGSTOP) past its claims, fenced and not
//	TestFenceIncreasesAcrossARestartWithPersistence  fencing tokens after a restart from the append-only file
//	TestChainedLostClaims                          the wait behind claims whose replies were lost
//	TestFailoverOfALaggingReplica                  a replica trailing by 50ms promoted mid-stream, with and without IDEM_MIN_REPLICAS
//	TestFailoverWithAStaleEndpoint                 the same, half the environments on the old primary for 500ms
//
// Each test asserts the properties the design promises under its fault (no work without a
// claim, fail closed while Redis is unreachable, no duplicate while the record survives, full
// recovery) and logs what it measured (outcome counts, durations, duplicate executions that
// the fault made possible) with t.Logf, which docs/reliability.md cites. Run them with
//
//	make test-faults
//
// The servers come from internal/testsupport: a missing redis-server skips these tests, or fails
// them when CI is set.
package faults
