package rdmacm

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rdmacm/cmwire"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/rocev2/backend/memlink"
)

// hostileSetup is a CM under test at 127.0.0.1 with a listener and a raw
// peer at 127.0.0.3.
func hostileSetup(t *testing.T) (*node, *rawPeer, *memlink.Network) {
	network := memlink.NewNetwork()
	be, err := network.Attach(netip.MustParseAddrPort("127.0.0.1:4791"))
	require.NoError(t, err)
	n := newNode(t, be, testConfig)
	_, err = n.cm.Listen(ListenConfig{Addr: srvAddr, Backlog: 4})
	require.NoError(t, err)
	return n, newRawPeer(t, network, "127.0.0.3:4791"), network
}

var target = netip.MustParseAddrPort("127.0.0.1:4791")

// req returns a well-formed REQ from the raw peer to the listener.
func rawREQ(comm, qpn uint32) cmwire.MAD {
	m := cmwire.NewCM(make([]byte, cmwire.MADLen), cmwire.AttrREQ, 0x77<<32|uint64(comm), 0)
	pd := make([]byte, cmwire.CMAHeaderLen)
	h := cmwire.NewCMAHeader(netip.MustParseAddrPort("127.0.0.3:40000"), srvAddr)
	h.Put(pd)
	gid := func(s string) cmwire.GID { return cmwire.GIDFromAddr(netip.MustParseAddr(s)) }
	(&cmwire.REQ{LocalCommID: comm, ServiceID: cmwire.ServiceID(cmwire.PortSpaceTCP, srvAddr.Port()), LocalCAGUID: 0x1234,
		LocalQPN: qpn, ResponderResources: 1, InitiatorDepth: 1, RemoteCMResponseTimeout: 14, StartingPSN: 7,
		LocalCMResponseTimeout: 14, RetryCount: 7, PKey: 0xffff, PathMTU: 3, RNRRetryCount: 7, MaxCMRetries: 15,
		Primary: cmwire.Path{LocalLID: 0xffff, RemoteLID: 0xffff, LocalGID: gid("127.0.0.3"), RemoteGID: gid("127.0.0.1"),
			HopLimit: 64, LocalACKTimeout: 11}, PrivateData: pd}).Encode(m)
	return m
}

func TestHostileMADs(t *testing.T) {
	n, peer, _ := hostileSetup(t)
	c := &n.cm.Counters
	mad := func(class cmwire.Class, method cmwire.Method, attr cmwire.AttrID) cmwire.MAD {
		m := cmwire.NewCM(make([]byte, cmwire.MADLen), attr, 9, 0)
		m[1], m[3] = byte(class), byte(method)
		return m
	}

	// Truncated, too long, wrong Q_Key, another transport: dropped at QP 1.
	peer.sendPacket(t, target, rocev2.UDSendOnly, 1, cmwire.GSIQKey, make([]byte, 200))
	peer.sendPacket(t, target, rocev2.UDSendOnly, 1, cmwire.GSIQKey, make([]byte, 300))
	peer.sendPacket(t, target, rocev2.UDSendOnly, 1, 0x1111, make([]byte, 256))
	f := rocev2.Fields{Opcode: rocev2.RCSendOnly, PKey: 0xffff, DestQP: 1}
	rc, err := f.Append(nil, make([]byte, 256))
	require.NoError(t, err)
	out := peer.dev.Outbox()
	out.Commit(append(out.Buffer(), rc...), target)
	out.Done()
	peer.none(t, target)
	require.Equal(t, uint64(1), c.RcvdShort.Load())
	require.Equal(t, uint64(1), c.RcvdLong.Load())
	require.Equal(t, uint64(1), n.dev.Counters.QKeyViol.Load())
	require.Equal(t, uint64(1), c.RcvdWrongOpcode.Load())

	// A Get of the CM's ClassPortInfo, of another class: Linux's answer.
	for _, class := range []cmwire.Class{cmwire.ClassCM, cmwire.ClassPerf} {
		peer.send(t, target, mad(class, cmwire.MethodGet, cmwire.AttrClassPortInfo))
		a := peer.next(t).Header()
		require.Equal(t, cmwire.Header{BaseVersion: 1, Class: class, ClassVersion: 2, Method: cmwire.MethodGetResp,
			Status: cmwire.StatusUnsupportedMethodAttr, TID: 9, AttrID: cmwire.AttrClassPortInfo}, a)
	}

	// What Linux drops without a word.
	bad := mad(cmwire.ClassCM, cmwire.MethodSend, cmwire.AttrREQ)
	bad[0] = 2
	peer.send(t, target, bad)
	peer.send(t, target, mad(cmwire.ClassSubnLID, cmwire.MethodGet, 0x15))
	peer.send(t, target, mad(cmwire.ClassCM, cmwire.MethodGet, cmwire.AttrREQ))
	peer.send(t, target, mad(0x09, cmwire.MethodSend, 0x10))
	peer.send(t, target, mad(cmwire.ClassCM, cmwire.MethodSend, 0x40))
	peer.send(t, target, mad(cmwire.ClassCM, cmwire.MethodSend, cmwire.AttrLAP))
	// Messages for no connection: a REP for no REQ, an RTU, DREP, MRA, REJ
	// and SIDR_REP of a stale CM ID.
	for _, a := range []cmwire.AttrID{cmwire.AttrREP, cmwire.AttrRTU, cmwire.AttrDREP, cmwire.AttrMRA, cmwire.AttrREJ, cmwire.AttrSIDRRep} {
		m := mad(cmwire.ClassCM, cmwire.MethodSend, a)
		m[cmwire.HeaderLen], m[cmwire.HeaderLen+4] = 0x42, 0x43
		peer.send(t, target, m)
	}
	peer.none(t, target)
	require.Equal(t, uint64(1), c.DropBaseVersion.Load())
	require.Equal(t, uint64(1), c.DropSMI.Load())
	require.Equal(t, uint64(1), c.DropCMMethod.Load())
	require.Equal(t, uint64(1), c.DropNoAgent.Load())
	require.Equal(t, uint64(1), c.DropAttr.Load())
	require.Equal(t, uint64(1), c.NoRoCEPaths.Load())
	require.Equal(t, uint64(6), c.NoID.Load())
	require.Equal(t, uint64(4), c.Answered.Load()) // the two Gets and none's two probes
	n.cm.mu.Lock()
	require.Empty(t, n.cm.ids, "no CM state for any of it")
	n.cm.mu.Unlock()

	// A DREQ for no connection gets its DREP (cm_issue_drep).
	dreq := mad(cmwire.ClassCM, cmwire.MethodSend, cmwire.AttrDREQ)
	(&cmwire.DREQ{LocalCommID: 0x55, RemoteCommID: 0x66, RemoteQPNEECN: 0x99}).Encode(dreq)
	peer.send(t, target, dreq)
	drep := peer.next(t)
	require.Equal(t, cmwire.AttrDREP, drep.Attr())
	d := cmwire.DecodeDREP(drep)
	require.Equal(t, [2]uint32{0x66, 0x55}, [2]uint32{d.LocalCommID, d.RemoteCommID})

	// A REQ for a port nobody listens on: REJ invalid service ID, with
	// the REQ's TID and its comm ID as the remote one.
	req := rawREQ(0x1001, 0x20)
	req[cmwire.HeaderLen+14] = 0x99 // the service ID's port: another one
	peer.send(t, target, req)
	rej := cmwire.DecodeREJ(peer.next(t))
	require.Equal(t, cmwire.RejInvalidServiceID, rej.Reason)
	require.Equal(t, uint32(0x1001), rej.RemoteCommID)
	require.Equal(t, uint32(0), rej.LocalCommID)
	require.Equal(t, cmwire.MsgREQ, rej.MessageRejected)

	// An rdma_cm header of another version: REJ consumer defined.
	req = rawREQ(0x1002, 0x21)
	req[cmwire.HeaderLen+140] = 1
	peer.send(t, target, req)
	rej = cmwire.DecodeREJ(peer.next(t))
	require.Equal(t, cmwire.RejConsumerDefined, rej.Reason)
	require.Equal(t, uint64(1), c.BadRDMACMHeader.Load())

	// A REQ naming a GID that is not ours: REJ invalid GID with our GID 0.
	req = rawREQ(0x1003, 0x22)
	req[cmwire.HeaderLen+72+15] = 9 // primary remote GID: 127.0.0.9
	peer.send(t, target, req)
	rej = cmwire.DecodeREJ(peer.next(t))
	require.Equal(t, cmwire.RejInvalidGID, rej.Reason)
	require.Equal(t, uint8(16), rej.ARILength)
	n.cm.mu.Lock()
	require.Empty(t, n.cm.ids)
	n.cm.mu.Unlock()
}

// A flood of REQs: the backlog (4) holds what waits, the rest is dropped
// and counted; CM state stays bounded. A duplicate of a waiting REQ gets
// an MRA; one from the same QP with another comm ID is a stale
// connection only once the first is established.
func TestREQFlood(t *testing.T) {
	n, peer, _ := hostileSetup(t)
	for i := range uint32(100) {
		peer.send(t, target, rawREQ(0x2000+i, 0x100+i))
	}
	peer.none(t, target)
	c := &n.cm.Counters
	require.Equal(t, uint64(100), c.RxMsgs[attrIndex(cmwire.AttrREQ)].Load())
	require.Equal(t, uint64(96), c.ListenOverflow.Load())
	n.cm.mu.Lock()
	require.Len(t, n.cm.ids, 4)
	n.cm.mu.Unlock()

	peer.send(t, target, rawREQ(0x2000, 0x100)) // a waiting one again
	mra := cmwire.DecodeMRA(peer.next(t))
	require.Equal(t, cmwire.MsgREQ, mra.MessageMRAed)
	require.Equal(t, uint32(0x2000), mra.RemoteCommID)
	require.Equal(t, uint8(24), mra.ServiceTimeout)
	require.Equal(t, uint64(1), c.RxDuplicates[attrIndex(cmwire.AttrREQ)].Load())

	// The peer's QP 0x100 asks again under a new comm ID while its first
	// REQ waits: a stale connection (ib_cm checks the QP too).
	peer.send(t, target, rawREQ(0x3000, 0x100))
	rej := cmwire.DecodeREJ(peer.next(t))
	require.Equal(t, cmwire.RejStaleConn, rej.Reason)
	require.Equal(t, uint64(1), c.StaleConns.Load())
}

// A DREQ naming another QP than the connection's is dropped; the
// connection stays.
func TestDREQForAnotherQP(t *testing.T) {
	network := memlink.NewNetwork()
	attach := func(a string) backend.Backend {
		be, err := network.Attach(netip.MustParseAddrPort(a))
		require.NoError(t, err)
		return be
	}
	srv, cli := newNode(t, attach("127.0.0.1:4791"), testConfig), newNode(t, attach("127.0.0.2:4791"), testConfig)
	peer := newRawPeer(t, network, "127.0.0.3:4791")
	ctx := testCtx(t)
	l, err := srv.cm.Listen(ListenConfig{Addr: srvAddr})
	require.NoError(t, err)
	done := serve(ctx, l, AcceptConfig{})
	conn, err := dialer(cli).Dial(ctx, srvAddr)
	require.NoError(t, err)
	defer conn.Close()

	srv.cm.mu.Lock()
	var sid *cmID
	for _, id := range srv.cm.ids {
		sid = id
	}
	srv.cm.mu.Unlock()
	dreq := cmwire.NewCM(make([]byte, cmwire.MADLen), cmwire.AttrDREQ, 1, 0)
	(&cmwire.DREQ{LocalCommID: sid.remoteID, RemoteCommID: sid.localID, RemoteQPNEECN: sid.localQPN + 1}).Encode(dreq)
	peer.send(t, target, dreq)
	peer.none(t, target)
	require.Equal(t, uint64(1), srv.cm.Counters.WrongQPN.Load())
	select {
	case <-conn.Done():
		t.Fatal("a DREQ for another QP ended the connection")
	default:
	}
	require.NoError(t, conn.Disconnect())
	waitDone(t, ctx, conn)
	require.NoError(t, <-done)
}
