package udp

import "github.com/goroce/goroce/rocev2/backend"

// api is every method Backend has on every system (see backend_other.go):
// a program that builds on Linux builds everywhere.
type api interface {
	backend.Backend
	Features() (gso, gro bool)
}

var _ api = (*Backend)(nil)
