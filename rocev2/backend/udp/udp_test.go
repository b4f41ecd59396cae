//go:build linux

package udp

import (
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/backendtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// exchangeSizes mixes GSO-friendly runs of equal sizes (with a shorter last
// one, and runs longer than a GSO send can hold) with sizes that change at
// every packet: payloads from 16 to 9000 bytes.
func exchangeSizes(rng *rand.Rand) []int {
	var s []int
	add := func(n, size int) {
		for range n {
			s = append(s, size)
		}
	}
	add(5, 16)
	add(20, 1024)
	add(10, 4096)
	add(1, 100)
	add(8, 9000) // 72 KB: more than one GSO send
	add(70, 256) // more than a batch
	for range 30 {
		s = append(s, 16+rng.IntN(9000-16+1))
	}
	add(3, 2048)
	return s
}

func TestExchange(t *testing.T) {
	for _, tc := range []struct {
		name  string
		a, b  string
		noGSO bool
		noGRO bool
	}{
		{name: "ipv4/gso+gro", a: "127.0.0.1:0", b: "127.0.0.2:0"},
		{name: "ipv4/gso", a: "127.0.0.1:0", b: "127.0.0.2:0", noGRO: true},
		{name: "ipv4/gro", a: "127.0.0.1:0", b: "127.0.0.2:0", noGSO: true},
		{name: "ipv4/plain", a: "127.0.0.1:0", b: "127.0.0.2:0", noGSO: true, noGRO: true},
		{name: "ipv6/gso+gro", a: "[::1]:0", b: "[::1]:0"},
		{name: "ipv6/plain", a: "[::1]:0", b: "[::1]:0", noGSO: true, noGRO: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{DisableGSO: tc.noGSO, DisableGRO: tc.noGRO}
			cfg.Addr = netip.MustParseAddrPort(tc.a)
			a := open(t, cfg)
			cfg.Addr = netip.MustParseAddrPort(tc.b)
			b := open(t, cfg)
			for _, be := range []*Backend{a, b} {
				gso, gro := be.Features()
				assert.Equal(t, !tc.noGSO, gso, "gso")
				assert.Equal(t, !tc.noGRO, gro, "gro")
			}

			rng := rand.New(rand.NewPCG(1, 2))
			sent := packets(t, rng, b.LocalAddr(), exchangeSizes(rng))
			wait := startReceiving(b, len(sent), 10*time.Second)
			require.NoError(t, a.Send(sent))
			gso, _ := a.Features()
			assert.Equal(t, !tc.noGSO, gso, "the kernel refused GSO")

			got := wait(t)
			ttl := defaultTTL(t, b.LocalAddr().Addr().Is6())
			var segmented int
			for i, d := range got {
				require.Equal(t, sent[i].Buf, d.Buf, "packet %d", i)
				assert.Equal(t, backend.ICRCOK, d.ICRC, "packet %d", i)
				assert.Equal(t, a.LocalAddr(), d.Src)
				// From the control messages: the system's default TTL
				// (hop limit), no TOS.
				assert.Equal(t, ttl, d.TTL, "packet %d: TTL", i)
				assert.Equal(t, uint8(0), d.TOS, "packet %d: TOS", i)
				assert.Equal(t, sent[i].Wire.IPv4ID, d.IPv4ID, "packet %d", i)
				if sent[i].Wire.IPv4ID != 0 {
					segmented++
				}
			}
			if gso && a.LocalAddr().Addr().Is4() {
				assert.Positive(t, segmented, "no datagram left as a GSO segment k > 0")
			} else {
				assert.Zero(t, segmented, "plain datagrams leave with IPv4 ID 0")
			}
		})
	}
}

func TestGSOIDs(t *testing.T) {
	a := open(t, Config{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
	b := open(t, Config{Addr: netip.MustParseAddrPort("127.0.0.2:0"), DisableGRO: true})
	c := netip.MustParseAddrPort("127.0.0.3:4791")
	sizes := []int{1024, 1024, 1024, 100, 1024, 1024, 2048, 2048, 64, 64}
	pkts := packets(t, rand.New(rand.NewPCG(3, 4)), b.LocalAddr(), sizes)
	pkts[5].Dst = c // another destination ends a run
	require.NoError(t, a.Send(pkts))
	ids := make([]uint16, len(pkts))
	for i, p := range pkts {
		ids[i] = p.Wire.IPv4ID
	}
	// Runs: [1024 1024 1024 100] [1024] | [1024 to c] | [2048 2048 64]
	// [64]: a shorter datagram ends a run, another destination or a longer
	// one starts the next. (A run of fewer than minGSOSegments would go as
	// plain datagrams; none is that short here but [1024] and [64].)
	assert.Equal(t, []uint16{0, 1, 2, 3, 0, 0, 0, 1, 2, 0}, ids)
	got := receiveN(t, b, len(pkts)-1, 5*time.Second)
	for i, d := range got {
		j := i
		if i >= 5 {
			j++
		}
		assert.Equal(t, pkts[j].Buf, d.Buf)
		assert.Equal(t, backend.ICRCOK, d.ICRC)
		assert.Equal(t, ids[j], d.IPv4ID, "the receiver infers the ID from the ICRC")
	}
}

func TestCorruptPacketIsBad(t *testing.T) {
	b := open(t, Config{Addr: netip.MustParseAddrPort("127.0.0.2:0")})
	raw, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 3)})
	require.NoError(t, err)
	defer raw.Close()
	from := raw.LocalAddr().(*net.UDPAddr).AddrPort()
	from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())

	pkts := packets(t, rand.New(rand.NewPCG(5, 6)), b.LocalAddr(), []int{64, 64, 1000, 1000, 0})
	fl := rocev2.NewFlow(from, b.LocalAddr())
	for _, p := range pkts {
		fl.SealICRC(p.Buf)
	}
	pkts[1].Buf[20] ^= 0x10                   // payload bit
	pkts[3].Buf[len(pkts[3].Buf)-1] ^= 0x80   // ICRC bit
	pkts[4].Buf = pkts[4].Buf[:rocev2.BTHLen] // no room for an ICRC
	for _, p := range pkts {
		_, err := raw.WriteToUDPAddrPort(p.Buf, b.LocalAddr())
		require.NoError(t, err)
	}
	got := receiveN(t, b, len(pkts), 5*time.Second)
	want := []backend.ICRCStatus{backend.ICRCOK, backend.ICRCBad, backend.ICRCOK, backend.ICRCBad, backend.ICRCBad}
	for i, d := range got {
		assert.Equal(t, want[i], d.ICRC, "packet %d", i)
		assert.Equal(t, from, d.Src)
	}
}

func TestCloseUnblocksReceive(t *testing.T) {
	b, err := Open(Config{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
	require.NoError(t, err)
	backendtest.Run(t, b, packets(t, rand.New(rand.NewPCG(1, 1)), b.LocalAddr(), []int{8}))
}

func TestOpenErrors(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", "[::]:0"} {
		_, err := Open(Config{Addr: netip.MustParseAddrPort(addr)})
		assert.Error(t, err, addr)
	}
	_, err := Open(Config{})
	assert.Error(t, err, "zero address")
}

func TestSendBadDatagrams(t *testing.T) {
	a := open(t, Config{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
	b := open(t, Config{Addr: netip.MustParseAddrPort("127.0.0.2:0")})
	pkts := packets(t, rand.New(rand.NewPCG(7, 8)), b.LocalAddr(), []int{32, 32, 32, 32})
	pkts[1].Dst = netip.MustParseAddrPort("[::1]:4791") // wrong family
	pkts[2].Buf = pkts[2].Buf[:2]                       // no ICRC
	err := a.Send(pkts)
	assert.ErrorIs(t, err, errDest)
	got := receiveN(t, b, 2, 5*time.Second)
	assert.Equal(t, pkts[0].Buf, got[0].Buf)
	assert.Equal(t, pkts[3].Buf, got[1].Buf, "the datagrams after a bad one still go")
}

func TestGSOFallback(t *testing.T) {
	for _, errno := range []unix.Errno{unix.EIO, unix.EINVAL} {
		t.Run(errno.Error(), func(t *testing.T) {
			a := open(t, Config{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
			b := open(t, Config{Addr: netip.MustParseAddrPort("127.0.0.2:0")})
			// The kernel refuses the first segmented message.
			real := a.tx.write
			refused := 0
			a.tx.write = func(hdrs []unix.Mmsghdr) (int, error) {
				for i := range hdrs {
					if hdrs[i].Hdr.Controllen != 0 {
						if i == 0 {
							refused++
							return 0, errno
						}
						hdrs = hdrs[:i]
						break
					}
				}
				return real(hdrs)
			}
			sizes := []int{100, 512, 512, 512, 512, 64}
			pkts := packets(t, rand.New(rand.NewPCG(9, 10)), b.LocalAddr(), sizes)
			require.NoError(t, a.Send(pkts))
			assert.Equal(t, 1, refused)
			gso, _ := a.Features()
			assert.False(t, gso, "GSO stays off after the kernel refused it")
			got := receiveN(t, b, len(pkts), 5*time.Second)
			for i, d := range got {
				assert.Equal(t, pkts[i].Buf, d.Buf)
				assert.Equal(t, backend.ICRCOK, d.ICRC)
				assert.Zero(t, d.IPv4ID, "resealed for ID 0")
			}
		})
	}
}

func TestReceiveSmallSlices(t *testing.T) {
	// A GRO super-datagram handed out a packet at a time: the rest waits in
	// the backend's buffer for the next calls.
	a := open(t, Config{Addr: netip.MustParseAddrPort("127.0.0.1:0")})
	b := open(t, Config{Addr: netip.MustParseAddrPort("127.0.0.2:0")})
	pkts := packets(t, rand.New(rand.NewPCG(11, 12)), b.LocalAddr(), []int{700, 700, 700, 700, 300})
	require.NoError(t, a.Send(pkts))
	one := make([]backend.Incoming, 1)
	var got [][]byte
	for len(got) < len(pkts) {
		n, err := b.Receive(one)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		assert.Equal(t, backend.ICRCOK, one[0].ICRC)
		got = append(got, one[0].Buf) // no copy: must stay valid
	}
	for i := range got {
		assert.Equal(t, pkts[i].Buf, got[i], "packet %d", i)
	}
}

func TestLinkMTU(t *testing.T) {
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Skip("no lo interface:", err)
	}
	for _, addr := range []string{"127.0.0.1:0", "127.0.0.2:0", "[::1]:0"} {
		b := open(t, Config{Addr: netip.MustParseAddrPort(addr)})
		assert.Equal(t, lo.MTU, b.LinkMTU(), addr)
	}
}

func TestKernelVersion(t *testing.T) {
	for _, tc := range []struct {
		release      string
		major, minor int
		ok           bool
	}{
		{"6.18.44-fc-v669", 6, 18, true},
		{"5.11.0", 5, 11, true},
		{"5.12", 5, 12, true},
		{"4.19.0-rc1", 4, 19, true},
		{"garbage", 0, 0, false},
	} {
		major, minor, ok := kernelVersion(tc.release)
		assert.Equal(t, tc.ok, ok, tc.release)
		if ok {
			assert.Equal(t, [2]int{tc.major, tc.minor}, [2]int{major, minor}, tc.release)
		}
	}
}

// defaultTTL is the TTL (hop limit) the system gives a socket's packets.
func defaultTTL(t *testing.T, ipv6 bool) uint8 {
	file := "/proc/sys/net/ipv4/ip_default_ttl"
	if ipv6 {
		file = "/proc/sys/net/ipv6/conf/lo/hop_limit"
	}
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	return uint8(n)
}
