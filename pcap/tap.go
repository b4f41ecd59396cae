package pcap

import (
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
)

// Tap is a backend.Backend that records every packet another backend sends
// and receives into a capture. It is a decorator, like gVisor's sniffer
// endpoint around a link endpoint: the device and its queue pairs know
// nothing of it, and any backend (UDP, memlink, a fault injector) can be
// tapped.
//
// A sent packet is recorded after the inner Send returns, when its ICRC is
// sealed and Outgoing.Wire says which IPv4 ID it left with; a received
// packet is recorded when the inner Receive returns it, with the IPv4 ID the
// backend recovered. Both are framed in the Ethernet, IP and UDP headers the
// packet travelled in (Writer.WriteRoCE), so that every ICRC in the capture
// verifies as it did on the wire. Packets whose ICRC the backend found bad
// or could not check are recorded as they are, with a comment saying so.
//
// Recording does not allocate. A failing capture (a full disk) does not
// disturb the traffic: the Tap counts the failed writes and keeps the first
// error for Err.
type Tap struct {
	inner backend.Backend
	w     *Writer
	local netip.AddrPort

	out, in, skipped, failed atomic.Uint64

	errMu sync.Mutex
	err   error // the first capture write error
}

var _ backend.Backend = (*Tap)(nil)

// Comments recorded with packets the device will not accept as they are.
const (
	commentSendError = "send error: the backend reported an error for this batch; the packet may not have left"
	commentICRCBad   = "ICRC bad: the device drops this packet"
	commentUnsealed  = "not sealed yet: a backend beneath the tap (a fault injector) holds, mangles or drops this packet; what leaves is sealed by the backend below it"
)

// NewTap returns a backend that moves packets through inner and records
// them with w; give a device t.Backend(), which keeps inner's non-blocking
// receive if it has one. The Tap does not own w: close the device (which
// closes the Tap and inner) before closing w.
func NewTap(inner backend.Backend, w *Writer) *Tap {
	return &Tap{inner: inner, w: w, local: inner.LocalAddr()}
}

// Unwrap returns the tapped backend.
func (t *Tap) Unwrap() backend.Backend { return t.inner }

// Send sends pkts through the inner backend, then records them as Outbound.
// Its result is the inner backend's.
func (t *Tap) Send(pkts []backend.Outgoing) error {
	err := t.inner.Send(pkts)
	if errors.Is(err, backend.ErrBackendClosed) {
		return err
	}
	comment := ""
	if err != nil {
		// The Backend contract does not say which packets of a failed
		// batch were dropped: record them all, marked.
		comment = commentSendError
	}
	for i := range pkts {
		d := &pkts[i]
		src := t.local
		if d.Wire.SrcPort != 0 { // a backend that chose the port per QP (afpacket)
			src = netip.AddrPortFrom(src.Addr(), d.Wire.SrcPort)
		}
		c := comment
		if d.Wire.Unsealed && c == "" {
			c = commentUnsealed
		}
		t.record(Outbound, src, d.Dst, d.Wire.IPv4ID, d.Buf, c)
	}
	return err
}

// Receive receives through the inner backend and records what it returns
// as Inbound before handing it on.
func (t *Tap) Receive(pkts []backend.Incoming) (int, error) {
	n, err := t.inner.Receive(pkts)
	t.recordReceived(pkts[:n])
	return n, err
}

// Backend returns the Tap as a device should be given it. When the inner
// backend can receive without blocking (backend.Poller), the returned
// backend can too, so that a tapped device keeps its busy-polling path
// (device.Poller); otherwise it is the Tap itself.
func (t *Tap) Backend() backend.Backend {
	return backend.KeepPolling(t, t.inner, t.recordReceived)
}

// recordReceived records received packets as Inbound.
func (t *Tap) recordReceived(pkts []backend.Incoming) {
	for i := range pkts {
		d := &pkts[i]
		if d.Drop != 0 {
			// Rejected by the backend before any parsing (an empty
			// datagram, a sender of another family): no frame to record.
			t.skipped.Add(1)
			continue
		}
		id, comment := d.IPv4ID, ""
		switch d.ICRC {
		case backend.ICRCBad:
			comment = commentICRCBad
		case backend.ICRCUnchecked:
			// The device will check (and infer the ID) itself; the
			// capture needs the ID now to frame the packet right.
			// (record skips a pair no IP header can carry.)
			fl := rocev2.NewFlow(d.Src, t.local)
			if inferred, ok := fl.InferIPv4ID(d.Buf); ok {
				id = inferred
			} else if !fl.IsIPv6() {
				comment = commentICRCBad
			}
		}
		t.record(Inbound, d.Src, t.local, id, d.Buf, comment)
	}
}

// record writes one packet framed for the flow src→dst with IPv4 ID id.
func (t *Tap) record(dir Direction, src, dst netip.AddrPort, id uint16, pkt []byte, comment string) {
	sa, da := src.Addr().Unmap(), dst.Addr().Unmap()
	if !sa.IsValid() || !da.IsValid() || sa.Is4() != da.Is4() {
		// No IP header can carry this pair; the backend refuses such a
		// packet too.
		t.skipped.Add(1)
		return
	}
	fl := rocev2.NewFlow(src, dst)
	fl.IPv4ID = id
	fl.SrcMAC, fl.DstMAC = macFor(sa), macFor(da)
	if err := t.w.WriteRoCEComment(time.Now(), dir, &fl, pkt, comment); err != nil {
		t.fail(err)
		return
	}
	if dir == Outbound {
		t.out.Add(1)
	} else {
		t.in.Add(1)
	}
}

func (t *Tap) fail(err error) {
	t.failed.Add(1)
	t.errMu.Lock()
	if t.err == nil {
		t.err = err
	}
	t.errMu.Unlock()
}

// TapStats counts what a Tap recorded.
type TapStats struct {
	// Outbound and Inbound are the packets recorded in each direction.
	Outbound, Inbound uint64
	// Skipped are packets no IP header could frame (a destination of the
	// other address family); Failed are packets the Writer refused.
	Skipped, Failed uint64
}

// Stats returns the Tap's counts.
func (t *Tap) Stats() TapStats {
	return TapStats{Outbound: t.out.Load(), Inbound: t.in.Load(), Skipped: t.skipped.Load(), Failed: t.failed.Load()}
}

// Err returns the first error the capture writer reported, if any. Check it
// after the run: a nil Err means the capture holds every packet.
func (t *Tap) Err() error {
	t.errMu.Lock()
	defer t.errMu.Unlock()
	return t.err
}

// LocalAddr returns the inner backend's address.
func (t *Tap) LocalAddr() netip.AddrPort { return t.local }

// BatchSize returns the inner backend's batch size.
func (t *Tap) BatchSize() int { return t.inner.BatchSize() }

// LinkMTU returns the inner backend's link MTU.
func (t *Tap) LinkMTU() int { return t.inner.LinkMTU() }

// Close closes the inner backend. It does not close the Writer, which may
// still be shared with other taps and belongs to the caller.
func (t *Tap) Close() error { return t.inner.Close() }

// macFor derives the locally administered MAC 02:00:a.b.c.d from the last
// four bytes of an address, as goroce's device does for its GIDs, so that
// the Ethernet headers of a capture tell the two hosts apart.
func macFor(a netip.Addr) [6]byte {
	b := a.As16()
	return [6]byte{0x02, 0x00, b[12], b[13], b[14], b[15]}
}
