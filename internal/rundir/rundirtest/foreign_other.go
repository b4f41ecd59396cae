//go:build !unix

package rundirtest

import "testing"

// Nobody is the uid ForeignSocket's server would run as.
const Nobody = 65534

// ForeignSocket skips the test: running a process as another user needs
// a Unix system.
func ForeignSocket(t testing.TB, path, reply string) *Process {
	t.Skip("needs a Unix system to run a process as another user")
	return nil
}

// ForeignPublisher skips the test: running a process as another user
// needs a Unix system.
func ForeignPublisher(t testing.TB, tmp, name, reply string) *Process {
	t.Skip("needs a Unix system to run a process as another user")
	return nil
}
