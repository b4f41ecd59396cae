package rdmacm

import (
	"net/netip"

	"github.com/goroce/goroce/rdmacm/cmwire"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
)

// The GSI: goroce's QP 1. It takes what the device routes to QP 1 on the
// receive path (HandlePacket, registered with device.SetGSI) and sends
// MADs as rxe sends them: UD SEND_ONLY from QP 1 to QP 1, Q_Key
// 0x80010000, P_Key 0xFFFF, AckReq set (rxe sets it on the last packet of
// every message), PSNs counting up from 0, 256 bytes of payload.

// rxQueueLen is how many MADs wait for the CM at most: Linux's MAD layer
// posts 512 receive buffers per QP 1 (ib_mad's mad_recvq_size); past that
// a flood is dropped, as it would be for want of a receive buffer.
const rxQueueLen = 512

// rxMAD is one MAD taken off QP 1, copied out of the receive buffer.
type rxMAD struct {
	mad  [cmwire.MADLen]byte
	from netip.AddrPort // the sender: its address and the UDP port its device receives on (Config.PeerRoCEPort)
}

// gsi is the device.QPHandler of QP 1.
type gsi struct{ cm *CM }

// HandlePacket checks what the receive path hands to QP 1 and queues the
// MADs for the CM's goroutine. It runs inline on the receive path, so it
// never waits: a full queue drops. As a UD QP's, only a packet of the
// wrong transport is not delivered (rcvd_pkts counts the others).
func (g gsi) HandlePacket(pkt *rocev2.Packet, dg *backend.Incoming) (delivered bool) {
	c := g.cm
	if op := pkt.Opcode(); op != rocev2.UDSendOnly && op != rocev2.UDSendOnlyImm {
		// QP 1 is a UD QP: another transport's packet is refused as rxe
		// refuses it for any UD QP.
		c.dev.Counters.RcvdWrongQPType.Add(1)
		c.Counters.RcvdWrongOpcode.Add(1)
		return false
	}
	if pkt.DETH().QKey() != cmwire.GSIQKey {
		c.dev.Counters.QKeyViol.Add(1)
		return true
	}
	m, err := cmwire.ParseMAD(pkt.Payload())
	switch err {
	case nil:
	case cmwire.ErrShort:
		c.Counters.RcvdShort.Add(1)
		return true
	default:
		c.dev.Counters.RcvdDropLen.Add(1)
		c.Counters.RcvdLong.Add(1)
		return true
	}
	r := rxMAD{from: netip.AddrPortFrom(dg.Src.Addr().Unmap(), c.cfg.PeerRoCEPort(dg.Src))}
	copy(r.mad[:], m)
	select {
	case c.rx <- r:
	default:
		c.Counters.RcvdQueueFull.Add(1)
	}
	return true
}

// peerPort returns the UDP port to send a peer's MADs and packets to,
// given the source port its packets came from. rxe and goroce's AF_PACKET
// backend send from a port in RoCE's source range (0xC000 and up, derived
// from the QP) and receive on 4791; goroce's UDP backend sends from the
// port it receives on, which tests set to another port to run several
// devices on one address.
func peerPort(src uint16) uint16 {
	if src >= 0xC000 || src == 0 {
		return rocev2.UDPPort
	}
	return src
}

// sendMAD builds a MAD into the device's outbox for dst. c.mu is held: the
// outbox is given back at once, and the push, if due, waits for unlock.
func (c *CM) sendMAD(m cmwire.MAD, dst netip.AddrPort) {
	out := c.dev.OutboxFor(backend.Sender{QPN: cmwire.GSIQPN})
	f := rocev2.Fields{Opcode: rocev2.UDSendOnly, PKey: cmwire.GSIPKey, DestQP: cmwire.GSIQPN, AckReq: true,
		PSN: c.psn, QKey: cmwire.GSIQKey, SrcQP: cmwire.GSIQPN}
	c.psn = c.psn.Add(1)
	buf, _ := f.AppendHeaders(out.Buffer(), cmwire.MADLen) // a fixed, valid opcode: cannot fail
	buf = append(buf, m...)
	buf = rocev2.AppendTrailer(buf, cmwire.MADLen)
	out.Commit(buf, dst)
	if out.Release() {
		c.push = true
	}
	if a := m.Attr(); a.IsCM() {
		c.Counters.TxMsgs[attrIndex(a)].Add(1)
	}
}
