package qp

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/rocev2"
)

// TestPingPongSurvivesHostileDatagrams runs an RC ping-pong between two
// devices on real UDP sockets while a third socket sends them hostile
// datagrams: empty ones first, then short ones, random bytes, and
// well-formed packets with valid ICRCs aimed at the live QP with its
// expected PSN (an injection attempt that only the source-address check
// stops). The ping-pong must finish with every message intact, and every
// hostile datagram must be counted under its reason.
func TestPingPongSurvivesHostileDatagrams(t *testing.T) {
	a, b := newPair(t, pairConfig{udp: true, depth: 64, bufSize: 1 << 16})
	attacker, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.3:0")))
	require.NoError(t, err)
	defer attacker.Close()
	target := b.dev.LocalAddr()
	from := attacker.LocalAddr().(*net.UDPAddr).AddrPort()
	send := func(p []byte) {
		_, err := attacker.WriteToUDPAddrPort(p, target)
		require.NoError(t, err)
	}
	sealed := func(fl rocev2.Fields, payload []byte) []byte {
		fl.PKey = 0xffff
		p, _ := fl.Append(nil, payload)
		f := rocev2.NewFlow(from, target)
		f.SealICRC(p)
		return p
	}
	counter := func(name string) uint64 {
		v, ok := b.dev.Counters.Get(name)
		require.True(t, ok, name)
		return v
	}
	dropped := func() (n uint64) {
		for i := range b.dev.Counters.Dropped {
			n += b.dev.Counters.Dropped[i].Load()
		}
		return n
	}
	dropped0 := dropped()
	start := map[string]uint64{}
	for _, n := range []string{"rcvd_bad_datagram", "rcvd_truncated", "rcvd_addr_err", "rcvd_unknown_qp"} {
		start[n] = counter(n)
	}

	const empties, shorts, spoofs = 50, 50, 200
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the attacker: bounded in count, runs beside the ping-pong
		defer wg.Done()
		for range empties {
			send(nil)
		}
		for i := range shorts {
			send(make([]byte, 1+i%15))
		}
		junk := make([]byte, 2048)
		for i := range spoofs {
			psn := b.qp.Query().RQPSN
			send(sealed(rocev2.Fields{Opcode: rocev2.RCSendOnly, DestQP: b.qp.QPN(), PSN: psn}, bytes.Repeat([]byte{0xEE}, 64)))
			for k := range junk {
				junk[k] = byte(i*7 + k*13)
			}
			send(junk[:64+i%1900]) // random bytes: a bad ICRC at best
		}
	}()

	// The ping-pong: a sends message i to b, b answers with its inverse.
	const rounds = 300
	for i := range rounds {
		size := 1 + (i*97)%4096
		msg := func(from byte) []byte {
			p := make([]byte, size)
			for k := range p {
				p[k] = byte(i) ^ byte(k) ^ from
			}
			return p
		}
		exchange(t, a, b, msg(0xA0))
		exchange(t, b, a, msg(0x0B))
	}
	wg.Wait()

	// A fence: a well-formed packet to QP 1, which is never a QP's number, after
	// everything else on the same socket (loopback keeps order).
	send(sealed(rocev2.Fields{Opcode: rocev2.RCAcknowledge, DestQP: 1}, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // hang guard
	defer cancel()
	for counter("rcvd_unknown_qp") == start["rcvd_unknown_qp"] {
		select {
		case <-ctx.Done():
			t.Fatal("the fence never arrived")
		case <-time.After(time.Millisecond):
		}
	}
	d := func(n string) uint64 { return counter(n) - start[n] }
	require.Equal(t, uint64(empties), d("rcvd_bad_datagram"), "empty datagrams")
	require.Equal(t, uint64(shorts), d("rcvd_truncated"), "datagrams shorter than a BTH and ICRC")
	require.Equal(t, uint64(spoofs), d("rcvd_addr_err"), "packets for the QP from a stranger's address")
	require.Equal(t, uint64(empties+shorts+spoofs), dropped()-dropped0, "random bytes are dropped too, each under some reason")
}

// exchange sends p from src to dst over their RC QPs and checks it arrives
// intact.
func exchange(t *testing.T, src, dst *node, p []byte) {
	t.Helper()
	clear(dst.buf[:len(p)])
	_, err := dst.qp.PostRecv([]RecvWR{{WRID: 2, SGL: []SGE{dst.sge(0, len(dst.buf))}}})
	require.NoError(t, err)
	copy(src.buf, p)
	_, err = src.qp.PostSend([]SendWR{{WRID: 1, Opcode: WRSend, Flags: SendSignaled, SGL: []SGE{src.sge(0, len(p))}}})
	require.NoError(t, err)
	s := waitWCs(t, src.cq, 1, 30*time.Second)
	require.Equal(t, cq.Success, s[0].Status)
	r := waitWCs(t, dst.cq, 1, 30*time.Second)
	require.Equal(t, cq.Success, r[0].Status)
	require.Equal(t, uint32(len(p)), r[0].ByteLen)
	require.Equal(t, p, dst.buf[:len(p)], "message intact")
}
