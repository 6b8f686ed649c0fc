// Package testsupport starts the servers that tests in this module need: a shared Redis, private
// redis-server processes, a real Redis Cluster, a fault-injecting TCP proxy and a local
// DynamoDB-compatible server (dynalite).
//
// Every helper ties the lifetime of what it starts to the test: servers are killed in
// t.Cleanup, so a test never has to stop them itself.
//
// When a server cannot be started (its binary is missing, it does not come up, or the shared
// Redis does not answer), the helper skips the test with a message saying what is missing. When
// the environment variable CI is set to a non-empty value, it fails the test instead, so a
// broken CI image cannot turn into a green run that tested nothing. See [Unavailable].
package testsupport

import (
	"os"
	"testing"
)

// Unavailable reports that something a test needs cannot be provided. It calls t.Fatalf when the
// environment variable CI is non-empty and t.Skipf otherwise. Either way the test stops, so
// Unavailable must be called from the goroutine running the test.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("testsupport: "+format+" (CI is set, so this fails instead of skipping)", args...)
		return // only reached with a testing.TB whose Fatalf does not stop the test
	}
	t.Skipf("testsupport: "+format+" (skipped; set CI=1 to make this a failure)", args...)
}
