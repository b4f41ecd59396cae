//go:build linux

package smcr_test

import (
	"net/netip"
	"testing"

	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/shm"
	"github.com/goroce/goroce/smcr"
)

// overShm has a pair's stacks use the shared-memory link between their
// devices, in a run directory of the test's own.
func overShm(t *testing.T) func(*smcr.Config) {
	dir := t.TempDir()
	return func(c *smcr.Config) {
		c.Backend = func(ap netip.AddrPort) (backend.Backend, error) { return shm.Open(shm.Config{Addr: ap, Dir: dir}) }
	}
}

// SMC-R over the shared-memory link: every size across every wrap, and a
// link group of 200 connections, as over UDP.
func TestTransferSizesOverShm(t *testing.T) { testTransferSizes(t, overShm(t)) }

func TestManyConnectionsOverShm(t *testing.T) { testManyConnectionsShareALinkGroup(t, overShm(t)) }
