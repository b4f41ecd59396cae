package smcr_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/pcap"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend"
	"github.com/goroce/goroce/smcr"
)

// What goroce puts on the wire in an SMC-R echo matches what Linux 6.12
// put there in the same echo (smcr_echo_small: a client writes 100, 1024,
// 4096 and 8192 bytes, each echoed, then shuts down writing; the server
// closes at EOF): per direction, the same LLC messages (type, length,
// flags), the same RDMA WRITE sizes, and the same CDC messages (sequence
// numbers, cursors, flags). Compared as message sequences, not packets:
// the path MTUs differ (4096 over loopback, 1024 there).
//
// Two differences are Linux's choice, not the protocol's, and are left
// out of the comparison: a Linux server offers a second link (ADD_LINK,
// which the client rejects; a goroce server negotiates one link), and the
// crossing DELETE_RKEY requests and responses at the end come in either
// order on each side.
func TestWireMatchesLinuxEcho(t *testing.T) {
	noLeaks(t)
	kernel := smcMessages(t, readCapture(t, "../conformance/testdata/rxe/smcr_echo_small.pcap"),
		netip.MustParseAddr("198.18.0.12"))

	var (
		capMu sync.Mutex
		buf   bytes.Buffer
		w     *pcap.Writer
		cli   netip.Addr
	)
	p := newPair(t, nil)
	cli = p.d.LocalAddr
	wrapBackends(t, func(b backend.Backend) backend.Backend {
		if b.LocalAddr().Addr() != cli {
			return b
		}
		capMu.Lock()
		defer capMu.Unlock()
		var err error
		w, err = pcap.NewWriter(&buf, pcap.WriterOptions{Format: pcap.FormatPCAP, ResealICRC: true})
		require.NoError(t, err)
		return pcap.NewTap(b, w).Backend()
	})
	c, s := p.dial(t)
	requireMode(t, c, smcr.ModeSMCRv2)
	cStats, sStats := smcr.StatsFunc(c.(*smcr.Conn)), smcr.StatsFunc(s.(*smcr.Conn))

	done := make(chan error, 1)
	go func() { // the server echoes as Linux's smc_echo does (read, write) until EOF, then closes
		buf := make([]byte, 64<<10)
		for {
			n, err := s.Read(buf)
			if n > 0 {
				if _, werr := s.Write(buf[:n]); werr != nil {
					err = werr
				}
			}
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				done <- errors.Join(err, s.Close())
				return
			}
		}
	}()
	for _, n := range []int{100, 1024, 4096, 8192} {
		msg := make([]byte, n)
		pattern(msg, n)
		_, err := c.Write(msg)
		require.NoError(t, err)
		got := make([]byte, n)
		_, err = io.ReadFull(c, got)
		require.NoError(t, err)
		require.Equal(t, msg, got)
	}
	require.NoError(t, c.(*smcr.Conn).CloseWrite())
	rest, err := io.ReadAll(c)
	require.NoError(t, err)
	require.Empty(t, rest)
	require.NoError(t, <-done)
	require.NoError(t, c.Close())
	require.NoError(t, p.ln.Close())
	// The capture is complete once both RMBs are deleted and the client's
	// device closed (the server ends the idle group; its DELETE_LINK ends
	// the client's).
	waitFor(t, 30*time.Second, func() bool {
		return cStats().RKeysDeleted == 1 && sStats().RKeysDeleted == 1 && smcr.OpenStacks() == 0
	})
	capMu.Lock()
	require.NoError(t, w.Flush())
	goroce := smcMessages(t, readCapture(t, &buf), cli)
	capMu.Unlock()

	for dir, name := range []string{"client to server", "server to client"} {
		want, got := comparable(kernel[dir]), comparable(goroce[dir])
		require.Equal(t, strings.Join(want, "\n"), strings.Join(got, "\n"),
			"%s: Linux's messages (left) against goroce's (right)", name)
	}
}

// readCapture returns the frames of a capture file (a path) or buffer.
func readCapture(t *testing.T, src any) []pcap.Record {
	t.Helper()
	var r io.Reader
	switch v := src.(type) {
	case string:
		f, err := os.Open(v)
		require.NoError(t, err)
		t.Cleanup(func() { f.Close() })
		r = f
	case io.Reader:
		r = v
	}
	pr, err := pcap.NewReader(r)
	require.NoError(t, err)
	var out []pcap.Record
	for {
		rec, err := pr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		out = append(out, rec)
	}
}

// smcMessages lists the SMC-R messages of a capture per direction (0: from
// client, 1: to it): LLC and CDC messages and RDMA WRITE sizes, each
// request packet counted once (a retransmission repeats a PSN).
func smcMessages(t *testing.T, recs []pcap.Record, client netip.Addr) [2][]string {
	t.Helper()
	var out [2][]string
	seen := [2]map[rocev2.PSN]bool{{}, {}}
	for _, rec := range recs {
		pkt := gopacket.NewPacket(rec.Data, rec.LinkType, gopacket.Default)
		ip, ok := pkt.NetworkLayer().(*layers.IPv4)
		if !ok {
			continue
		}
		bth, ok := pkt.Layer(pcap.LayerTypeBTH).(*pcap.BTH)
		if !ok || bth.Opcode == rocev2.RCAcknowledge {
			continue
		}
		src, _ := netip.AddrFromSlice(ip.SrcIP)
		dir := 1
		if src.Unmap() == client {
			dir = 0
		}
		if seen[dir][bth.PSN] {
			continue
		}
		seen[dir][bth.PSN] = true
		switch {
		case pkt.Layer(pcap.LayerTypeRETH) != nil:
			out[dir] = append(out[dir], fmt.Sprintf("WRITE %d", pkt.Layer(pcap.LayerTypeRETH).(*pcap.RETH).DMALength))
		case pkt.Layer(pcap.LayerTypeSMCCDC) != nil:
			c := pkt.Layer(pcap.LayerTypeSMCCDC).(*pcap.SMCCDC)
			out[dir] = append(out[dir], fmt.Sprintf("CDC seq %d prod %d:%d cons %d:%d flags %#02x %#02x",
				c.Seq, c.Prod.Wrap, c.Prod.Count, c.Cons.Wrap, c.Cons.Count, uint8(c.ProdFlags), uint8(c.ConnFlags)))
		case pkt.Layer(pcap.LayerTypeSMCLLC) != nil:
			l := pkt.Layer(pcap.LayerTypeSMCLLC).(*pcap.SMCLLC)
			out[dir] = append(out[dir], fmt.Sprintf("LLC %s len %d flags %#02x", l.Name(), l.Length, uint8(l.Flags)))
		}
	}
	return out
}

// comparable drops what is Linux's choice (see the test's comment) and
// what comes after the connection (DELETE_LINK, TEST_LINK), and puts the
// final DELETE_RKEY exchange in one order.
func comparable(msgs []string) []string {
	var out, tail []string
	for _, m := range msgs {
		switch {
		case strings.HasPrefix(m, "LLC ADD_LINK"), strings.HasPrefix(m, "LLC DELETE_LINK"), strings.HasPrefix(m, "LLC TEST_LINK"):
		case strings.HasPrefix(m, "LLC DELETE_RKEY"):
			tail = append(tail, m)
		default:
			out = append(out, m)
		}
	}
	slices.Sort(tail)
	return append(out, tail...)
}
