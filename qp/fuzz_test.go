package qp

import (
	"bytes"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/memlink"
	"github.com/goroce/goroce/rocev2/device"
)

// FuzzInbound throws arbitrary packets at an RC, a UC and a UD QP in RTS
// (each packet at the QP of its opcode's transport): nothing panics, and a
// memory region open to remote write, read and atomics is never changed by
// a packet that does not carry its (random, unguessable) rkey.
func FuzzInbound(f *testing.F) {
	const rqPSN = 0x100
	seed := func(fl rocev2.Fields, payload []byte) {
		fl.PKey, fl.PSN = 0xffff, rqPSN
		b, _ := fl.Append(nil, payload)
		f.Add(b)
	}
	seed(rocev2.Fields{Opcode: rocev2.RCSendOnly, AckReq: true}, []byte("hello"))
	seed(rocev2.Fields{Opcode: rocev2.RCSendFirst}, make([]byte, 256))
	seed(rocev2.Fields{Opcode: rocev2.RCWriteOnly, VA: 0x1000, RKey: 0x1234, Len: 8}, make([]byte, 8))
	seed(rocev2.Fields{Opcode: rocev2.RCWriteFirst, VA: 0x1000, RKey: 0x1234, Len: 1024}, make([]byte, 256))
	seed(rocev2.Fields{Opcode: rocev2.RCReadRequest, VA: 0x1000, RKey: 0x1234, Len: 4096}, nil)
	seed(rocev2.Fields{Opcode: rocev2.RCFetchAdd, VA: 0x1000, RKey: 0x1234, SwapAdd: 1}, nil)
	seed(rocev2.Fields{Opcode: rocev2.RCCompareSwap, VA: 0x1004, RKey: 0x1234}, nil)
	seed(rocev2.Fields{Opcode: rocev2.RCAcknowledge, Syndrome: 0x60}, nil)
	seed(rocev2.Fields{Opcode: rocev2.RCReadResponseOnly}, make([]byte, 16))
	seed(rocev2.Fields{Opcode: rocev2.RCSendOnlyInv, InvRKey: 0x1234}, nil)
	seed(rocev2.Fields{Opcode: rocev2.UCSendFirst}, make([]byte, 1024))
	seed(rocev2.Fields{Opcode: rocev2.UCWriteOnlyImm, VA: 0x1000, RKey: 0x1234, Len: 8, Imm: 1}, make([]byte, 8))
	seed(rocev2.Fields{Opcode: rocev2.UDSendOnly, QKey: testQKey, SrcQP: 9}, []byte("hello"))
	seed(rocev2.Fields{Opcode: rocev2.UDSendOnlyImm, QKey: testQKey, Imm: 2}, make([]byte, 5000))

	network := memlink.NewNetwork()
	be, err := network.Attach(netip.MustParseAddrPort("127.0.0.1:4791"))
	if err != nil {
		f.Fatal(err)
	}
	dev, err := device.New(device.Config{Backend: be})
	if err != nil {
		f.Fatal(err)
	}
	defer dev.Close()
	attacker, err := network.Attach(netip.MustParseAddrPort("127.0.0.66:4791"))
	if err != nil {
		f.Fatal(err)
	}
	defer attacker.Close()
	go func() { // drain whatever the QP answers
		batch := make([]backend.Incoming, 64)
		for {
			if _, err := attacker.Receive(batch); err != nil {
				return
			}
		}
	}()

	pd := dev.AllocPD()
	target := make([]byte, 1<<16)
	for i := range target {
		target[i] = byte(i)
	}
	snapshot := bytes.Clone(target)
	if _, err := pd.RegisterMR(target, device.AccessLocalWrite|device.AccessRemoteWrite|device.AccessRemoteRead|device.AccessRemoteAtomic); err != nil {
		f.Fatal(err)
	}
	rbuf := make([]byte, 1<<16)
	rmr, err := pd.RegisterMR(rbuf, device.AccessLocalWrite)
	if err != nil {
		f.Fatal(err)
	}
	c, _ := cq.New(4096, cq.Config{})
	var qps [3]*QP // RC, UC, UD
	for i, typ := range []Type{RC, UC, UD} {
		if qps[i], err = Create(pd, InitAttr{Type: typ, SendCQ: c, RecvCQ: c, Cap: Cap{MaxSendWR: 16, MaxRecvWR: 64}}); err != nil {
			f.Fatal(err)
		}
	}
	gid := device.GIDFromAddr(netip.MustParseAddr("127.0.0.66"))
	access := device.AccessRemoteWrite | device.AccessRemoteRead | device.AccessRemoteAtomic
	fence := func() {
		fl := rocev2.Fields{Opcode: rocev2.RCAcknowledge, PKey: 0xffff, DestQP: 1}
		b, _ := fl.Append(nil, nil)
		before := dev.Counters.RcvdUnknownQP.Load()
		if err := attacker.Send([]backend.Outgoing{{Buf: b, Dst: be.LocalAddr()}}); err != nil {
			f.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for dev.Counters.RcvdUnknownQP.Load() == before {
			if time.Now().After(deadline) {
				f.Fatal("device stopped processing packets")
			}
			runtime.Gosched()
		}
	}
	wcs := make([]cq.WC, 64)

	f.Fuzz(func(t *testing.T, pkt []byte) {
		// A fresh connection for every input.
		type step struct {
			a Attr
			m AttrMask
		}
		rc := []step{
			{Attr{State: Reset}, MaskState},
			{Attr{State: Init, Port: 1, AccessFlags: access}, MaskState | MaskPKeyIndex | MaskPort | MaskAccessFlags},
			{Attr{State: RTR, PathMTU: rocev2.MTU1024, DestQPN: 0x42, RQPSN: rqPSN, MaxDestRdAtomic: 4, MinRNRTimer: 1,
				AH: AH{DGID: gid, SGIDIndex: 1}}, MaskState | MaskAV | MaskPathMTU | MaskDestQPN | MaskRQPSN | MaskMaxDestRdAtomic | MaskMinRNRTimer},
			{Attr{State: RTS, SQPSN: 0x200, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 4},
				MaskState | MaskSQPSN | MaskTimeout | MaskRetryCnt | MaskRNRRetry | MaskMaxQPRdAtomic},
		}
		uc := []step{
			{Attr{State: Reset}, MaskState},
			{Attr{State: Init, Port: 1, AccessFlags: device.AccessRemoteWrite}, MaskState | MaskPKeyIndex | MaskPort | MaskAccessFlags},
			{Attr{State: RTR, PathMTU: rocev2.MTU1024, DestQPN: 0x43, RQPSN: rqPSN, AH: AH{DGID: gid, SGIDIndex: 1}},
				MaskState | MaskAV | MaskPathMTU | MaskDestQPN | MaskRQPSN},
			{Attr{State: RTS, SQPSN: 0x200}, MaskState | MaskSQPSN},
		}
		ud := []step{
			{Attr{State: Reset}, MaskState},
			{Attr{State: Init, Port: 1, QKey: testQKey}, MaskState | MaskPKeyIndex | MaskPort | MaskQKey},
			{Attr{State: RTR}, MaskState},
			{Attr{State: RTS, SQPSN: 0x200}, MaskState | MaskSQPSN},
		}
		for i, steps := range [][]step{rc, uc, ud} {
			for _, s := range steps {
				if err := qps[i].Modify(&s.a, s.m); err != nil {
					t.Fatal(err)
				}
			}
		}
		for c.Poll(wcs) > 0 {
		}
		for i, q := range qps {
			sge := SGE{Addr: rmr.VA() + uint64(i)*8192, Length: 8192, LKey: rmr.LKey()}
			if _, err := q.PostRecv([]RecvWR{{WRID: 1, SGL: []SGE{sge}}}); err != nil {
				t.Fatal(err)
			}
		}
		p := bytes.Clone(pkt)
		if len(p) >= 8 {
			q := qps[0]
			switch rocev2.Opcode(p[0]).Transport() {
			case rocev2.TransportUC:
				q = qps[1]
			case rocev2.TransportUD:
				q = qps[2]
			}
			p[5], p[6], p[7] = byte(q.QPN()>>16), byte(q.QPN()>>8), byte(q.QPN())
		}
		if len(p) >= 4 { // the ICRC is sealed by the sender's backend
			if err := attacker.Send([]backend.Outgoing{{Buf: p, Dst: be.LocalAddr()}}); err != nil {
				t.Fatal(err)
			}
		}
		fence()
		if !bytes.Equal(target, snapshot) {
			t.Fatalf("memory changed by a packet without the rkey: % x", pkt)
		}
	})
}
