package qp

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/rocev2"
)

// TestTransferSurvivesForgedResponses runs RC traffic between two devices
// on real UDP sockets, 64 KiB SENDs both ways (rc_pingpong -s 65536) and
// WRITEs, READs and FetchAdds one way, while a third party forges each
// requester's responses from the other device's IP address (another
// UDP port: the source-address check lets them in): NAKs of every code,
// RNR NAKs, ACKs, READ responses and atomic ACKs, with PSNs far from
// anything sent. One such NAK used to end the transfer on both sides. The
// transfer must complete with every byte intact, and every forgery be
// counted as a ghost.
func TestTransferSurvivesForgedResponses(t *testing.T) {
	const (
		size    = 64 << 10
		rounds  = 200
		forgery = 3000 // at most, in all
		// Forged PSNs are the victim's next PSN at the time of the
		// forgery plus one of these: they stay clear of its window for
		// as long as fewer than 1<<20 PSNs are sent (a round sends 210).
		near = 1 << 20
	)
	offsets := []uint32{near, 0x400000, 0x7FFFFF, 0x800000, 0xC00000, 1<<24 - near}
	a, b := newPair(t, pairConfig{udp: true, depth: 64, bufSize: 1 << 18})

	type forger struct {
		conn   *net.UDPConn
		from   netip.AddrPort
		victim *node
		sent   int
		fences uint64
	}
	forgers := []*forger{}
	for _, p := range []struct{ spoof, victim *node }{{b, a}, {a, b}} {
		c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(p.spoof.dev.LocalAddr().Addr(), 0)))
		require.NoError(t, err)
		defer c.Close()
		forgers = append(forgers, &forger{conn: c, from: c.LocalAddr().(*net.UDPAddr).AddrPort(), victim: p.victim})
	}
	kinds := []struct {
		fl      rocev2.Fields
		payload int
	}{
		{rocev2.Fields{Opcode: rocev2.RCAcknowledge, Syndrome: 0x60}, 0},
		{rocev2.Fields{Opcode: rocev2.RCAcknowledge, Syndrome: 0x61}, 0},
		{rocev2.Fields{Opcode: rocev2.RCAcknowledge, Syndrome: 0x62}, 0},
		{rocev2.Fields{Opcode: rocev2.RCAcknowledge, Syndrome: 0x63}, 0},
		{rocev2.Fields{Opcode: rocev2.RCAcknowledge, Syndrome: 0x64}, 0},
		{rocev2.Fields{Opcode: rocev2.RCAcknowledge, Syndrome: 0x20}, 0}, // RNR NAK, 655 ms
		{rocev2.Fields{Opcode: rocev2.RCAcknowledge, Syndrome: 0x2C}, 0}, // RNR NAK, 0.64 ms
		{rocev2.Fields{Opcode: rocev2.RCAcknowledge, Syndrome: 0x1F}, 0}, // ACK: would complete what is in flight
		{rocev2.Fields{Opcode: rocev2.RCReadResponseFirst, Syndrome: 0x1F}, 1024},
		{rocev2.Fields{Opcode: rocev2.RCReadResponseMiddle}, 1024},
		{rocev2.Fields{Opcode: rocev2.RCReadResponseLast, Syndrome: 0x1F}, 512},
		{rocev2.Fields{Opcode: rocev2.RCReadResponseOnly, Syndrome: 0x1F}, 8},
		{rocev2.Fields{Opcode: rocev2.RCAtomicAcknowledge, Syndrome: 0x1F, Orig: 0xDEAD}, 0},
	}
	ghosts := func() uint64 { return a.dev.Counters.RcvdGhostResp.Load() + b.dev.Counters.RcvdGhostResp.Load() }
	addrErr0 := a.counter(t, "rcvd_addr_err") + b.counter(t, "rcvd_addr_err")
	ghosts0 := ghosts()

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	send := func(f *forger, fl rocev2.Fields, payload int) bool {
		fl.PKey = 0xffff
		p, err := fl.Append(nil, make([]byte, payload))
		if err != nil {
			panic(err)
		}
		target := f.victim.dev.LocalAddr()
		flow := rocev2.NewFlow(f.from, target)
		flow.SealICRC(p)
		_, err = f.conn.WriteToUDPAddrPort(p, target)
		return err == nil
	}
	// fence sends a packet to QP 1, which is never a QP's number, and
	// waits until the victim has counted it, and so handled every
	// forgery sent before it on the same socket (loopback keeps order).
	unknown0 := map[*forger]uint64{}
	for _, f := range forgers {
		unknown0[f] = f.victim.dev.Counters.RcvdUnknownQP.Load()
	}
	fence := func(f *forger) {
		f.fences++
		if !send(f, rocev2.Fields{Opcode: rocev2.RCAcknowledge, DestQP: 1}, 0) {
			return
		}
		for f.victim.dev.Counters.RcvdUnknownQP.Load()-unknown0[f] < f.fences && ctx.Err() == nil {
			time.Sleep(50 * time.Microsecond) // a poll: it asserts nothing about time
		}
	}
	var stop atomic.Bool // the transfer is over
	wg.Add(1)
	go func() { // the forger: bounded in count, paced by fences
		defer wg.Done()
		for i := 0; i < forgery && !stop.Load() && ctx.Err() == nil; i++ {
			f := forgers[i%len(forgers)]
			k := kinds[(i/len(forgers))%len(kinds)]
			fl := k.fl
			fl.DestQP = f.victim.qp.QPN()
			fl.PSN = f.victim.qp.Query().SQPSN.Add(offsets[(i/len(forgers)/len(kinds))%len(offsets)])
			if !send(f, fl, k.payload) {
				return
			}
			f.sent++
			if i%64 >= 62 { // each forger's 32nd: let its victim catch up, no socket overflows
				fence(f)
			}
		}
		for _, f := range forgers {
			fence(f)
		}
	}()

	// b: the READ source and the FetchAdd counter.
	readSrc := make([]byte, 16<<10)
	for i := range readSrc {
		readSrc[i] = byte(i*13 + 5)
	}
	require.NoError(t, b.mr.WriteSync(b.mr.VA()+128<<10, readSrc))
	for i := range rounds {
		pattern := func(from byte) []byte {
			p := make([]byte, size)
			for k := range p {
				p[k] = byte(i) ^ byte(k) ^ byte(k>>8) ^ from
			}
			return p
		}
		w := pattern(0x57)
		copy(a.buf[64<<10:128<<10], w)
		clear(a.buf[128<<10 : 144<<10])
		_, err := a.qp.PostSend([]SendWR{
			{WRID: 10, Opcode: WRRDMAWrite, Flags: SendSignaled, SGL: []SGE{a.sge(64<<10, size)}, RemoteAddr: b.mr.VA() + 64<<10, RKey: b.mr.RKey()},
			{WRID: 11, Opcode: WRRDMARead, Flags: SendSignaled, SGL: []SGE{a.sge(128<<10, len(readSrc))}, RemoteAddr: b.mr.VA() + 128<<10, RKey: b.mr.RKey()},
			{WRID: 12, Opcode: WRAtomicFetchAdd, Flags: SendSignaled, SGL: []SGE{a.sge(200<<10, 8)}, RemoteAddr: b.mr.VA() + 192<<10, RKey: b.mr.RKey(), CompareAdd: 1},
		})
		require.NoError(t, err)
		wcs := waitWCs(t, a.cq, 3, 30*time.Second)
		for _, wc := range wcs {
			require.Equal(t, cq.Success, wc.Status, "round %d: %+v", i, wc)
		}
		got := make([]byte, size)
		require.NoError(t, b.mr.ReadSync(b.mr.VA()+64<<10, got))
		require.True(t, bytes.Equal(w, got), "round %d: the WRITE's data", i)
		require.Equal(t, readSrc, a.buf[128<<10:144<<10], "round %d: the READ's data", i)
		require.Equal(t, uint64(i), nativeGet(a.buf[200<<10:]), "round %d: the FetchAdd ran once per round", i)
		exchange(t, a, b, pattern(0xA0))
		exchange(t, b, a, pattern(0x0B))
	}
	stop.Store(true)
	wg.Wait()
	require.NoError(t, ctx.Err())
	forged := uint64(forgers[0].sent + forgers[1].sent)
	require.NotZero(t, forged)
	// The last fences are counted: every forgery has been handled.
	require.GreaterOrEqual(t, ghosts()-ghosts0, forged, "every forged response is a ghost (stale duplicates of real ones may be too)")
	assert.Equal(t, addrErr0, a.counter(t, "rcvd_addr_err")+b.counter(t, "rcvd_addr_err"), "the forgeries came from the peers' addresses")
	assert.Equal(t, RTS, a.qp.State())
	assert.Equal(t, RTS, b.qp.State())
	t.Logf("%d forged responses during %d rounds; %d ghosts counted", forged, rounds, ghosts()-ghosts0)
}
