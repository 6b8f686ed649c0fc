//go:build !unix

package testsupport

// lockFile does nothing where flock is unavailable; installing into a temporary directory and
// renaming it into place still keeps a concurrent install from leaving a half-written tool.
func lockFile(string) (unlock func(), err error) {
	return func() {}, nil
}
