package rundir

import (
	"io/fs"
	"net"
	"testing"
)

// FakeOwner makes files look owned by the uid owner says, for the rest
// of t.
func FakeOwner(t *testing.T, owner func(fs.FileInfo) int) {
	old := fileOwnerOf
	fileOwnerOf = func(fi fs.FileInfo) (int, error) { return owner(fi), nil }
	t.Cleanup(func() { fileOwnerOf = old })
}

// FakePeers makes the peers of sockets look like the uids next returns,
// for the rest of t.
func FakePeers(t *testing.T, next func() int) {
	old := peerUIDOf
	peerUIDOf = func(*net.UnixConn) (int, error) { return next(), nil }
	t.Cleanup(func() { peerUIDOf = old })
}

// SetRuntimeRoot makes Dirs look for users' runtime directories in dir,
// for the rest of t.
func SetRuntimeRoot(t *testing.T, dir string) {
	old := runtimeRoot
	runtimeRoot = dir
	t.Cleanup(func() { runtimeRoot = old })
}

// SetUID makes the process look like user uid, for the rest of t.
func SetUID(t *testing.T, uid int) {
	old := myUID
	myUID = func() int { return uid }
	t.Cleanup(func() { myUID = old })
}
