package rdmacm

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rdmacm/cmwire"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/memlink"
	"github.com/goroce/goroce/rocev2/device"
)

// rawPeer is a device without a CM whose QP 1 records what arrives and
// sends whatever a test builds: a hostile or a scripted peer.
type rawPeer struct {
	dev *device.Device
	got chan cmwire.MAD
}

func (r *rawPeer) HandlePacket(pkt *rocev2.Packet, dg *backend.Incoming) bool {
	if m, err := cmwire.ParseMAD(pkt.Payload()); err == nil {
		r.got <- append(cmwire.MAD(nil), m...)
	}
	return true
}

func newRawPeer(t *testing.T, network *memlink.Network, addr string) *rawPeer {
	t.Helper()
	be, err := network.Attach(netip.MustParseAddrPort(addr))
	require.NoError(t, err)
	dev, err := device.New(device.Config{Backend: be})
	require.NoError(t, err)
	t.Cleanup(func() { dev.Close() })
	r := &rawPeer{dev: dev, got: make(chan cmwire.MAD, 64)}
	_, err = dev.SetGSI(r)
	require.NoError(t, err)
	return r
}

// sendPacket sends a UD packet with payload to QP qpn at dst.
func (r *rawPeer) sendPacket(t *testing.T, dst netip.AddrPort, op rocev2.Opcode, qpn, qkey uint32, payload []byte) {
	t.Helper()
	f := rocev2.Fields{Opcode: op, PKey: 0xffff, DestQP: qpn, QKey: qkey, SrcQP: 1, AckReq: true}
	p, err := f.Append(nil, payload)
	require.NoError(t, err)
	out := r.dev.Outbox()
	buf := append(out.Buffer(), p...)
	out.Commit(buf, dst)
	out.Done()
}

// send sends a MAD to QP 1 at dst.
func (r *rawPeer) send(t *testing.T, dst netip.AddrPort, m cmwire.MAD) {
	t.Helper()
	r.sendPacket(t, dst, rocev2.UDSendOnly, 1, cmwire.GSIQKey, m)
}

// next waits for the next MAD the peer receives.
func (r *rawPeer) next(t *testing.T) cmwire.MAD {
	t.Helper()
	select {
	case m := <-r.got:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no MAD arrived")
		return nil
	}
}

// none checks that nothing arrives before the peer's own MAD to the CM
// under test has been answered: it sends a Get that the CM answers, and
// the answer must be the first MAD back.
func (r *rawPeer) none(t *testing.T, dst netip.AddrPort) {
	t.Helper()
	probe := cmwire.NewCM(make([]byte, cmwire.MADLen), cmwire.AttrClassPortInfo, 0xfeed, 0)
	probe[3] = byte(cmwire.MethodGet)
	r.send(t, dst, probe)
	m := r.next(t)
	require.Equal(t, cmwire.MethodGetResp, m.Header().Method, "%v arrived before the probe's answer", m.Attr())
	require.Equal(t, uint64(0xfeed), m.TID())
}

// dropper drops the packets to QP 1 (MADs) a test chooses, on send.
type dropper struct {
	backend.Backend
	mu   sync.Mutex
	drop func(m cmwire.MAD) bool
}

func (d *dropper) Send(pkts []backend.Outgoing) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	kept := pkts[:0:0]
	for _, p := range pkts {
		var pkt rocev2.Packet
		if d.drop != nil && pkt.Parse(p.Buf) == nil && pkt.BTH().DestQP() == 1 {
			if m, err := cmwire.ParseMAD(pkt.Payload()); err == nil && d.drop(m) {
				continue
			}
		}
		kept = append(kept, p)
	}
	return d.Backend.Send(kept)
}

// dropFirst drops the first n MADs of attribute a.
func dropFirst(a cmwire.AttrID, n int) func(cmwire.MAD) bool {
	return func(m cmwire.MAD) bool {
		if m.Attr() == a && n > 0 {
			n--
			return true
		}
		return false
	}
}
