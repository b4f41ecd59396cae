package qp_test

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend/memlink"
	"github.com/goroce/goroce/rocev2/device"
)

// end is one side of the example: a device, a memory region and an RC QP.
type end struct {
	dev *device.Device
	mr  *device.MR
	cq  *cq.CQ
	qp  *qp.QP
	psn rocev2.PSN
}

func open(network *memlink.Network, addr string, buf []byte) (*end, error) {
	be, err := network.Attach(netip.MustParseAddrPort(addr))
	if err != nil {
		return nil, err
	}
	dev, err := device.New(device.Config{Backend: be}) // the device owns the backend
	if err != nil {
		be.Close()
		return nil, err
	}
	e := &end{dev: dev, psn: qp.RandomPSN()}
	pd := dev.AllocPD()
	if e.mr, err = pd.RegisterMR(buf, device.AccessLocalWrite|device.AccessRemoteWrite); err != nil {
		return nil, err
	}
	if e.cq, err = cq.New(16, cq.Config{}); err != nil {
		return nil, err
	}
	e.qp, err = qp.Create(pd, qp.InitAttr{Type: qp.RC, SendCQ: e.cq, RecvCQ: e.cq,
		Cap: qp.Cap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}})
	return e, err
}

// connect moves e's QP through INIT and RTR to RTS towards peer, as
// ibv_rc_pingpong does once the two sides have exchanged QP numbers, PSNs
// and GIDs.
func (e *end) connect(peer *end) error {
	gid, err := peer.dev.GID(1) // the RoCEv2 GID of the peer's address
	if err != nil {
		return err
	}
	if err := e.qp.Modify(&qp.Attr{State: qp.Init, Port: 1, AccessFlags: device.AccessRemoteWrite},
		qp.MaskState|qp.MaskPKeyIndex|qp.MaskPort|qp.MaskAccessFlags); err != nil {
		return err
	}
	if err := e.qp.Modify(&qp.Attr{State: qp.RTR, PathMTU: rocev2.MTU1024, DestQPN: peer.qp.QPN(), RQPSN: peer.psn,
		AH: qp.AH{DGID: gid, SGIDIndex: 1, HopLimit: 64, DestPort: peer.dev.LocalAddr().Port()}},
		qp.MaskState|qp.MaskAV|qp.MaskPathMTU|qp.MaskDestQPN|qp.MaskRQPSN|qp.MaskMaxDestRdAtomic|qp.MaskMinRNRTimer); err != nil {
		return err
	}
	return e.qp.Modify(&qp.Attr{State: qp.RTS, SQPSN: e.psn, Timeout: 14, RetryCnt: 7, RNRRetry: 7},
		qp.MaskState|qp.MaskSQPSN|qp.MaskTimeout|qp.MaskRetryCnt|qp.MaskRNRRetry|qp.MaskMaxQPRdAtomic)
}

// Two devices on an in-memory network, an RC queue pair between them, and
// one RDMA WRITE from a's memory region into b's, checked by its
// completion: the first thing an RDMA program does.
func Example_write() {
	network := memlink.NewNetwork()
	src := []byte("hello, remote memory")
	dst := make([]byte, len(src))
	a, err := open(network, "127.0.0.1:4791", src)
	if err != nil {
		panic(err)
	}
	defer a.dev.Close()
	b, err := open(network, "127.0.0.2:4791", dst)
	if err != nil {
		panic(err)
	}
	defer b.dev.Close()
	if err := a.connect(b); err != nil {
		panic(err)
	}
	if err := b.connect(a); err != nil {
		panic(err)
	}

	// The WRITE names b's buffer by its address and rkey, which a real
	// program learns from b out of band (rc_pingpong's TCP exchange).
	_, err = a.qp.PostSend([]qp.SendWR{{
		WRID: 1, Opcode: qp.WRRDMAWrite, Flags: qp.SendSignaled,
		SGL:        []qp.SGE{{Addr: a.mr.VA(), Length: uint32(len(src)), LKey: a.mr.LKey()}},
		RemoteAddr: b.mr.VA(), RKey: b.mr.RKey(),
	}})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wcs := make([]cq.WC, 1)
	for a.cq.Poll(wcs) == 0 {
		if a.cq.Arm(false) {
			continue // a completion slipped in before the arm
		}
		if err := a.cq.Wait(ctx); err != nil {
			panic(err)
		}
	}
	fmt.Println(wcs[0].Status, wcs[0].Opcode, wcs[0].ByteLen)
	fmt.Printf("%s\n", dst)
	// Output:
	// IBV_WC_SUCCESS IBV_WC_RDMA_WRITE 20
	// hello, remote memory
}
