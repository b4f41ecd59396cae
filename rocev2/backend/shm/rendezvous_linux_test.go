package shm

import (
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(ents)
}

// A hostile dialer: whatever its hello, ring or doorbell is wrong with, the
// backend answers with a refusal (or closes), counts it, pairs with nobody
// and keeps no descriptor it was sent.
func TestRendezvousRefusesBadPeers(t *testing.T) {
	dir := runDir(t)
	b := openIn(t, dir, "127.0.0.2:4791", Config{})
	me := netip.MustParseAddrPort("127.0.0.1:4791")
	good := hello{instance: 7, from: me, to: b.LocalAddr(), ringSize: minRingSize, maxPacket: maxPacket}

	// ring makes a memfd of total bytes with seals, headed as a ring of
	// the hello's size: only what the case names is wrong with it.
	ring := func(t *testing.T, total int, seals int) int {
		fd, err := unix.MemfdCreate("hostile", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
		require.NoError(t, err)
		require.NoError(t, unix.Ftruncate(fd, int64(total)))
		hdr, err := newRing(make([]byte, ringHeaderSize+minRingSize))
		require.NoError(t, err)
		hdr.format()
		_, err = unix.Pwrite(fd, hdr.mem[:ringHeaderSize], 0)
		require.NoError(t, err)
		if seals != 0 {
			_, err = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals)
			require.NoError(t, err)
		}
		return fd
	}
	eventfd := func(t *testing.T) int {
		fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
		require.NoError(t, err)
		return fd
	}
	pipe := func(t *testing.T) int {
		var p [2]int
		require.NoError(t, unix.Pipe2(p[:], unix.O_CLOEXEC))
		unix.Close(p[1])
		return p[0]
	}
	total := ringHeaderSize + minRingSize
	sealed := requiredSeals | unix.F_SEAL_SEAL
	for _, tc := range []struct {
		name string
		h    func() hello
		fds  func(t *testing.T) []int
	}{
		{"a ring it could shrink under us", func() hello { return good }, func(t *testing.T) []int { return []int{ring(t, total, 0), eventfd(t)} }},
		{"a ring sealed against growing only", func() hello { return good }, func(t *testing.T) []int { return []int{ring(t, total, unix.F_SEAL_GROW), eventfd(t)} }},
		{"a ring smaller than its hello says", func() hello { return good }, func(t *testing.T) []int { return []int{ring(t, total-4096, sealed), eventfd(t)} }},
		{"a ring that is not a memfd", func() hello { return good }, func(t *testing.T) []int { return []int{pipe(t), eventfd(t)} }},
		{"a ring whose header is not a ring's", func() hello { return good }, func(t *testing.T) []int {
			fd := ring(t, total, sealed)
			unix.Pwrite(fd, []byte("notaring"), 0)
			return []int{fd, eventfd(t)}
		}},
		{"a doorbell that is a pipe", func() hello { return good }, func(t *testing.T) []int {
			h, err := newHalf(minRingSize)
			require.NoError(t, err)
			unix.Munmap(h.mem)
			unix.Close(h.bell)
			return []int{h.ringFD, pipe(t)}
		}},
		{"three descriptors", func() hello { return good }, func(t *testing.T) []int { return []int{ring(t, total, sealed), eventfd(t), eventfd(t)} }},
		{"one descriptor", func() hello { return good }, func(t *testing.T) []int { return []int{eventfd(t)} }},
		{"no descriptors", func() hello { return good }, func(t *testing.T) []int { return nil }},
		{"a hello for another address", func() hello { h := good; h.to = netip.MustParseAddrPort("127.0.0.3:4791"); return h },
			func(t *testing.T) []int { return []int{ring(t, total, sealed), eventfd(t)} }},
		{"a hello from ourselves", func() hello { h := good; h.from = b.LocalAddr(); return h },
			func(t *testing.T) []int { return []int{ring(t, total, sealed), eventfd(t)} }},
		{"a ring size that is not a power of two", func() hello { h := good; h.ringSize = minRingSize + 8; return h },
			func(t *testing.T) []int { return []int{ring(t, total+8, sealed), eventfd(t)} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := b.Stats().RefusedPeers
			fdsBefore := openFDs(t)
			c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: b.SocketPath(), Net: "unix"})
			require.NoError(t, err)
			defer c.Close()
			fds := tc.fds(t)
			h := tc.h()
			require.NoError(t, writeHello(c, &h, fds))
			for _, fd := range fds {
				unix.Close(fd) // the backend has its own copies now
			}
			c.SetDeadline(time.Now().Add(hangGuard))
			reply, rfds, err := readHello(c)
			if err == nil {
				assert.NotEqual(t, statusOK, reply.status, "paired with a bad peer")
				assert.Equal(t, [2]int{-1, -1}, rfds, "a refusal carries no descriptors")
			}
			eventually(t, "the refusal is counted", func() bool { return b.Stats().RefusedPeers > before })
			assert.Zero(t, b.Stats().Pairings)
			c.Close()
			eventually(t, "every descriptor it was sent is closed", func() bool { return openFDs(t) <= fdsBefore })
		})
	}
}

// hangGuard bounds a wait in these tests; nothing is timed.
const hangGuard = 30 * time.Second
