package smcr

import (
	"cmp"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/goroce/goroce/smcr/smcwire"
)

// The process's SMC statistics, what Linux counts per network namespace
// (net/smc/smc_stats.h) and smc-tools' smcr stats shows: SMC-R
// connections by role and version, handshake errors, fallbacks by role
// and reason, payload bytes and calls with their size buckets, the
// buffers' sizes and how often they were full or too small; and goroce's
// own CDC and LLC message counts. A Linux kernel counts for every program
// of the host; a goroce process counts its own, and smcr stats sums the
// processes it reads. Every counter only grows.

// NumSizeBuckets is Linux's SMC_BUF_MAX: sizes up to 8 KiB, 16 KiB, …,
// 1024 KiB, and above.
const NumSizeBuckets = 9

// SizeBucket is Linux's bucket of a size: fls((n-1)/8 KiB), the last
// bucket for all above 1 MiB.
func SizeBucket(n int) int {
	if n <= 0 {
		return 0
	}
	return min(bits.Len64(uint64(n-1)>>13), NumSizeBuckets-1)
}

// BufStats are one direction's buffer counters: the RMB's (RX) or the
// send buffer's (TX), Linux's smc_stats_rmbcnt and its size buckets.
type BufStats struct {
	Sizes         [NumSizeBuckets]uint64 `json:"sizes"`           // buffers made, by size
	Alloc         uint64                 `json:"alloc"`           // buffers allocated
	Reuse         uint64                 `json:"reuse"`           // buffers reused (goroce never reuses one)
	Downgrade     uint64                 `json:"downgrade"`       // smaller than asked (goroce never)
	Full          uint64                 `json:"full"`            // the buffer was full
	FullPeer      uint64                 `json:"full_peer"`       // TX: the peer's RMB was full
	SizeSmall     uint64                 `json:"size_small"`      // a call larger than the buffer
	SizeSmallPeer uint64                 `json:"size_small_peer"` // TX: larger than the peer's RMB
}

// Stats are the process's SMC statistics (see above).
type Stats struct {
	ClientV1 uint64 `json:"clnt_v1_succ"`
	ClientV2 uint64 `json:"clnt_v2_succ"`
	ServerV1 uint64 `json:"srv_v1_succ"`
	ServerV2 uint64 `json:"srv_v2_succ"`
	// Handshake errors: connections that failed in the handshake, neither
	// SMC-R nor a fallback (a timeout, a broken peer).
	ClientHandshakeErrors uint64 `json:"clnt_hshake_err_cnt"`
	ServerHandshakeErrors uint64 `json:"srv_hshake_err_cnt"`
	ClientFallbacks       uint64 `json:"clnt_fback_cnt"`
	ServerFallbacks       uint64 `json:"srv_fback_cnt"`
	// FallbackReasons counts fallbacks by side and reason (the local
	// reason code, 0x05000000 when the peer declined).
	FallbackReasons []FallbackCount `json:"fback_reasons,omitempty"`

	// Payload of SMC-R connections: bytes and calls (Read, Write, and the
	// chunks of ReadFrom and WriteTo), each call counted in the bucket of
	// the size it asked for.
	RxBytes   uint64                 `json:"rx_bytes"`
	TxBytes   uint64                 `json:"tx_bytes"`
	RxCalls   uint64                 `json:"rx_cnt"`
	TxCalls   uint64                 `json:"tx_cnt"`
	RxPayload [NumSizeBuckets]uint64 `json:"rx_pload"`
	TxPayload [NumSizeBuckets]uint64 `json:"tx_pload"`
	RMB       BufStats               `json:"rx_rmb"`
	SendBuf   BufStats               `json:"tx_rmb"`

	// goroce's own: the link messages sent and received.
	CDCSent     uint64 `json:"cdc_sent"`
	CDCReceived uint64 `json:"cdc_received"`
	LLCSent     uint64 `json:"llc_sent"`
	LLCReceived uint64 `json:"llc_received"`
}

// FallbackCount is the fallbacks of one side for one reason.
type FallbackCount struct {
	Server bool             `json:"server"`
	Code   smcwire.DiagCode `json:"code"`
	Count  uint64           `json:"count"`
}

// maxFallbackReasons bounds the reasons a snapshot carries: Linux keeps
// 30 per side (SMC_MAX_FBACK_RSN_CNT).
const maxFallbackReasons = 64

// counters are the live Stats (atomic fields, one set per process).
type counters struct {
	clientV1, clientV2, serverV1, serverV2 atomic.Uint64
	clientHSErr, serverHSErr               atomic.Uint64
	rxBytes, txBytes, rxCalls, txCalls     atomic.Uint64
	rxPayload, txPayload                   [NumSizeBuckets]atomic.Uint64
	rmb, snd                               bufCounters
	cdcSent, cdcRecv, llcSent, llcRecv     atomic.Uint64

	fbMu      sync.Mutex // guards fallbacks
	fallbacks map[FallbackCount]uint64
}

type bufCounters struct {
	sizes                                           [NumSizeBuckets]atomic.Uint64
	alloc, full, fullPeer, sizeSmall, sizeSmallPeer atomic.Uint64
}

var stats counters

// countConnected counts an SMC-R connection that completed its handshake.
func (c *counters) countConnected(server, v2 bool) {
	switch {
	case server && v2:
		c.serverV2.Add(1)
	case server:
		c.serverV1.Add(1)
	case v2:
		c.clientV2.Add(1)
	default:
		c.clientV1.Add(1)
	}
}

// countFallback counts a connection that fell back to TCP.
func (c *counters) countFallback(server bool, code smcwire.DiagCode) {
	c.fbMu.Lock()
	defer c.fbMu.Unlock()
	if c.fallbacks == nil {
		c.fallbacks = map[FallbackCount]uint64{}
	}
	k := FallbackCount{Server: server, Code: code}
	if _, ok := c.fallbacks[k]; !ok && len(c.fallbacks) >= maxFallbackReasons {
		k.Code = 0 // the reasons beyond the bound count together, as "unknown"
	}
	c.fallbacks[k]++
}

// countHandshakeError counts a connection whose handshake failed.
func (c *counters) countHandshakeError(server bool) {
	if server {
		c.serverHSErr.Add(1)
	} else {
		c.clientHSErr.Add(1)
	}
}

// countPayload counts one call that asked for want bytes and moved n.
func countPayload(calls, bytes *atomic.Uint64, buckets *[NumSizeBuckets]atomic.Uint64, want, n int) {
	calls.Add(1)
	if want <= 0 || n <= 0 {
		return
	}
	buckets[SizeBucket(want)].Add(1)
	bytes.Add(uint64(n))
}

// countTx and countRx count a send or receive call of an SMC-R connection.
func (c *counters) countTx(want, n int) { countPayload(&c.txCalls, &c.txBytes, &c.txPayload, want, n) }
func (c *counters) countRx(want, n int) { countPayload(&c.rxCalls, &c.rxBytes, &c.rxPayload, want, n) }

// countBuffers counts a connection's new RMB and send buffer.
func (c *counters) countBuffers(rmb, snd int) {
	c.rmb.alloc.Add(1)
	c.rmb.sizes[SizeBucket(rmb)].Add(1)
	c.snd.alloc.Add(1)
	c.snd.sizes[SizeBucket(snd)].Add(1)
}

// isCDC tells a CDC message from an LLC one.
func isCDC(msg []byte) bool { return smcwire.Classify(msg) == smcwire.KindCDC }

// countLinkMsg counts a CDC (or else LLC) message sent or received.
func (c *counters) countLinkMsg(cdc, sent bool) {
	switch {
	case cdc && sent:
		c.cdcSent.Add(1)
	case cdc:
		c.cdcRecv.Add(1)
	case sent:
		c.llcSent.Add(1)
	default:
		c.llcRecv.Add(1)
	}
}

func (b *bufCounters) snapshot() BufStats {
	s := BufStats{Alloc: b.alloc.Load(), Full: b.full.Load(), FullPeer: b.fullPeer.Load(),
		SizeSmall: b.sizeSmall.Load(), SizeSmallPeer: b.sizeSmallPeer.Load()}
	for i := range b.sizes {
		s.Sizes[i] = b.sizes[i].Load()
	}
	return s
}

// ReadStats returns the process's SMC statistics so far.
func ReadStats() Stats {
	c := &stats
	s := Stats{
		ClientV1: c.clientV1.Load(), ClientV2: c.clientV2.Load(), ServerV1: c.serverV1.Load(), ServerV2: c.serverV2.Load(),
		ClientHandshakeErrors: c.clientHSErr.Load(), ServerHandshakeErrors: c.serverHSErr.Load(),
		RxBytes: c.rxBytes.Load(), TxBytes: c.txBytes.Load(), RxCalls: c.rxCalls.Load(), TxCalls: c.txCalls.Load(),
		RMB: c.rmb.snapshot(), SendBuf: c.snd.snapshot(),
		CDCSent: c.cdcSent.Load(), CDCReceived: c.cdcRecv.Load(), LLCSent: c.llcSent.Load(), LLCReceived: c.llcRecv.Load(),
	}
	for i := range s.RxPayload {
		s.RxPayload[i], s.TxPayload[i] = c.rxPayload[i].Load(), c.txPayload[i].Load()
	}
	c.fbMu.Lock()
	for k, n := range c.fallbacks {
		k.Count = n
		s.FallbackReasons = append(s.FallbackReasons, k)
		if k.Server {
			s.ServerFallbacks += n
		} else {
			s.ClientFallbacks += n
		}
	}
	c.fbMu.Unlock()
	sortReasons(s.FallbackReasons)
	return s
}

// sortReasons orders fallback reasons as smc-tools shows them: the most
// frequent first (then by side and code, to be stable).
func sortReasons(rs []FallbackCount) {
	slices.SortFunc(rs, func(a, b FallbackCount) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		if a.Server != b.Server {
			if a.Server {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.Code, b.Code)
	})
}

// Add sums o into s: the statistics of several processes.
func (s *Stats) Add(o *Stats) {
	for _, p := range [][2]*uint64{
		{&s.ClientV1, &o.ClientV1}, {&s.ClientV2, &o.ClientV2}, {&s.ServerV1, &o.ServerV1}, {&s.ServerV2, &o.ServerV2},
		{&s.ClientHandshakeErrors, &o.ClientHandshakeErrors}, {&s.ServerHandshakeErrors, &o.ServerHandshakeErrors},
		{&s.ClientFallbacks, &o.ClientFallbacks}, {&s.ServerFallbacks, &o.ServerFallbacks},
		{&s.RxBytes, &o.RxBytes}, {&s.TxBytes, &o.TxBytes}, {&s.RxCalls, &o.RxCalls}, {&s.TxCalls, &o.TxCalls},
		{&s.CDCSent, &o.CDCSent}, {&s.CDCReceived, &o.CDCReceived}, {&s.LLCSent, &o.LLCSent}, {&s.LLCReceived, &o.LLCReceived},
	} {
		*p[0] += *p[1]
	}
	for i := range s.RxPayload {
		s.RxPayload[i] += o.RxPayload[i]
		s.TxPayload[i] += o.TxPayload[i]
	}
	s.RMB.add(&o.RMB)
	s.SendBuf.add(&o.SendBuf)
	merged := map[FallbackCount]uint64{}
	for _, r := range append(slices.Clone(s.FallbackReasons), o.FallbackReasons...) {
		n := r.Count
		r.Count = 0
		merged[r] += n
	}
	s.FallbackReasons = s.FallbackReasons[:0]
	for k, n := range merged {
		k.Count = n
		s.FallbackReasons = append(s.FallbackReasons, k)
	}
	sortReasons(s.FallbackReasons)
}

func (b *BufStats) add(o *BufStats) {
	for i := range b.Sizes {
		b.Sizes[i] += o.Sizes[i]
	}
	b.Alloc += o.Alloc
	b.Reuse += o.Reuse
	b.Downgrade += o.Downgrade
	b.Full += o.Full
	b.FullPeer += o.FullPeer
	b.SizeSmall += o.SizeSmall
	b.SizeSmallPeer += o.SizeSmallPeer
}

// countTxSizes counts a write larger than the send buffer or the peer's
// RMB (Linux's buf_size_small counters).
func (s *smcConn) countTxSizes(want int) {
	s.mu.Lock()
	peer := s.peerSize
	s.mu.Unlock()
	if want > len(s.snd) {
		stats.snd.sizeSmall.Add(1)
	}
	if uint64(want) > peer {
		stats.snd.sizeSmallPeer.Add(1)
	}
}

// countTxFull counts a write that must wait: the peer's RMB is full, or
// the send buffer is.
func (s *smcConn) countTxFull() {
	s.mu.Lock()
	peerFull := s.peerSpaceLocked() == 0
	s.mu.Unlock()
	if peerFull {
		stats.snd.fullPeer.Add(1)
	} else {
		stats.snd.full.Add(1)
	}
}

// countRxSizesLocked counts a read larger than the RMB, and one that
// finds the RMB full. mu is held.
func (s *smcConn) countRxSizesLocked(want int, avail uint64) {
	if want > len(s.rmb) {
		stats.rmb.sizeSmall.Add(1)
	}
	if avail == uint64(len(s.rmb)) {
		stats.rmb.full.Add(1)
	}
}
