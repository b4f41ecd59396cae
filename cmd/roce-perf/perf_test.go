//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/pcap"
	"github.com/goroce/goroce/rocev2"
)

// pair runs a server on 127.0.0.1 and a client on 127.0.0.2 in this
// process, both devices on ephemeral UDP ports, and returns the client's
// and the server's output. The server's flags are serverArgs, the client's
// clientArgs (without -d, -p and the server address).
func pair(t testing.TB, serverArgs, clientArgs []string) (client, server string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	scfg, err := parseFlags(append([]string{"-d", "127.0.0.1", "-p", "0", "-port", "0", "-timeout", "20s"}, serverArgs...), io.Discard)
	require.NoError(t, err)
	listening := make(chan net.Addr, 1)
	scfg.onListen = func(a net.Addr) { listening <- a }
	var sout, serr bytes.Buffer
	served := make(chan error, 1)
	go func() { served <- runConfig(ctx, scfg, &sout, &serr) }()

	var addr net.Addr
	select {
	case addr = <-listening:
	case err := <-served:
		require.FailNow(t, "the server exited before listening", "%v\n%s", err, serr.String())
	}
	port := strconv.Itoa(addr.(*net.TCPAddr).Port)
	args := append([]string{"-d", "127.0.0.2", "-p", port, "-port", "0", "-timeout", "20s"}, clientArgs...)
	ccfg, err := parseFlags(append(args, "127.0.0.1"), io.Discard)
	require.NoError(t, err)
	var cout, cerr bytes.Buffer
	err = runConfig(ctx, ccfg, &cout, &cerr)
	require.NoError(t, err, "client:\n%s%s", cout.String(), cerr.String())
	require.NoError(t, <-served, "server:\n%s%s", sout.String(), serr.String())
	return cout.String(), sout.String()
}

// Every test of -all runs and reports goroce's and the baseline's figures.
func TestAllJSON(t *testing.T) {
	out, srv := pair(t, []string{"-json"}, []string{"-all", "-n", "100", "-json"})
	var rep report
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	assert.Equal(t, "client", rep.Role)
	require.Len(t, rep.Results, 5)
	for i, test := range []string{kindWrite, kindSend, kindRead} {
		r := rep.Results[i]
		assert.Equal(t, test, r.Test)
		assert.Equal(t, defaultBWSize, r.Size)
		assert.Equal(t, 4096, r.MTU, "the largest MTU active on loopback")
		require.NotNil(t, r.GoRoCE, test)
		require.NotNil(t, r.Raw, test)
		assert.Equal(t, int64(100), r.GoRoCE.Msgs, test)
		assert.Equal(t, int64(100*defaultBWSize), r.GoRoCE.Bytes, test)
		assert.Positive(t, r.GoRoCE.Gbits, test)
		assert.GreaterOrEqual(t, r.GoRoCE.PeakMBs, r.GoRoCE.AvgMBs, test)
		assert.Equal(t, int64(100*16), r.Raw.Packets, "%s: 16 MTU-sized datagrams per message", test)
		assert.Positive(t, r.Raw.Gbits, test)
		assert.InDelta(t, r.GoRoCE.Gbits/r.Raw.Gbits, r.Ratio, 1e-9, test)
	}
	lat := rep.Results[3]
	assert.Equal(t, kindLat, lat.Test)
	assert.Equal(t, defaultLatSize, lat.Size)
	require.NotNil(t, lat.GoRoCELat)
	require.NotNil(t, lat.RawLat)
	assert.Equal(t, 100, lat.GoRoCELat.Iters)
	g := lat.GoRoCELat
	assert.True(t, g.TMin <= g.TTypical && g.TTypical <= g.P99 && g.P99 <= g.P999 && g.P999 <= g.TMax, "%+v", g)
	assert.Positive(t, lat.Ratio)

	ud := rep.Results[4]
	assert.Equal(t, kindUD, ud.Test)
	assert.Equal(t, 4096, ud.Size, "UD: one packet of the path MTU")
	require.NotNil(t, ud.GoRoCE)
	require.NotNil(t, ud.Raw)
	assert.Equal(t, int64(100), ud.GoRoCE.Packets)
	assert.Equal(t, int64(100), ud.GoRoCE.Msgs+ud.GoRoCE.Lost)
	assert.Equal(t, int64(100), ud.Raw.Packets, "one datagram per UD SEND")
	assert.InDelta(t, ud.GoRoCE.Gbits/ud.Raw.Gbits, ud.Ratio, 1e-9)

	var srep report
	require.NoError(t, json.Unmarshal([]byte(srv), &srep), srv)
	assert.Equal(t, "server", srep.Role)
	assert.Len(t, srep.Results, 5, "the server reports what the client measured")
}

// The UD test: MTU-sized SENDs under the raw baseline's window, none lost
// on loopback, and the table says UD.
func TestUDTable(t *testing.T) {
	out, _ := pair(t, nil, []string{"-t", "ud", "-m", "1024", "-n", "5000"})
	assert.Contains(t, out, " Connection type : UD\t\t")
	assert.Contains(t, out, resultFmt+"\n 1024       5000    ")
	assert.Contains(t, out, " UD SENDs of 1024 B, window 512, ack every 64: 5000 sent, 0 lost\n")
	assert.Contains(t, out, "1 x 1024 B datagrams per message")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	assert.Regexp(t, `^ud 1024B: goroce [0-9.]+ Gbit/s, raw UDP [0-9.]+ Gbit/s, ratio [0-9.]+$`, lines[len(lines)-1])
}

// The text output has perftest's table and ends with the summary line.
func TestWriteTable(t *testing.T) {
	out, _ := pair(t, nil, []string{"-t", "write", "-s", "8192", "-n", "200", "-q", "32", "-Q", "8"})
	assert.Contains(t, out, resultFmt+"\n 8192       200    ")
	assert.Contains(t, out, " local address: LID 0000 QPN 0x")
	assert.Contains(t, out, " GID: 00:00:00:00:00:00:00:00:00:00:255:255:127:00:00:02\n")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	assert.Regexp(t, `^write 8192B: goroce [0-9.]+ Gbit/s, raw UDP [0-9.]+ Gbit/s, ratio [0-9.]+$`, lines[len(lines)-1])
}

// A duration-bound run stops on time and still completes every request.
func TestDuration(t *testing.T) {
	start := time.Now()
	out, _ := pair(t, []string{"-json"}, []string{"-t", "read", "-D", "0.2", "-raw=false", "-json"})
	assert.Less(t, time.Since(start), 5*time.Second)
	var rep report
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	r := rep.Results[0]
	require.NotNil(t, r.GoRoCE)
	assert.Nil(t, r.Raw)
	assert.Positive(t, r.GoRoCE.Msgs)
	// The run ends with the last completion after 0.2 s: up to a TX depth
	// of requests later, slow under the race detector on a busy machine.
	assert.GreaterOrEqual(t, r.GoRoCE.Seconds, 0.2)
	assert.Less(t, r.GoRoCE.Seconds, 3.0, "counters: %+v", r.Counters)
	t.Logf("%.3f s, counters %+v", r.GoRoCE.Seconds, r.Counters)
}

// The demo runs every operation type, verified on both sides, and each
// side's capture holds every packet with a verifying ICRC.
func TestDemoCapture(t *testing.T) {
	dir := t.TempDir()
	scap, ccap := filepath.Join(dir, "server.pcapng"), filepath.Join(dir, "client.pcapng")
	out, srv := pair(t, []string{"-capture", scap}, []string{"-demo", "-capture", ccap})
	for _, op := range demoOps {
		assert.Regexp(t, ` `+op.name+` +x[0-9]+ .* ok `, out)
	}
	assert.Contains(t, out, "demo: 8 of 8 operation types verified")
	assert.Contains(t, srv, "responder: 23 checks passed")

	cout, cin := readCapture(t, ccap)
	sout, sin := readCapture(t, scap)
	assert.Positive(t, cout)
	assert.Positive(t, cin)
	assert.Equal(t, cout, sin, "what the client sent, the server received")
	assert.Equal(t, sout, cin)
}

// readCapture checks every frame's ICRC against the IP and UDP headers it
// was captured with, and counts the two directions. (The devices of these
// tests use ephemeral ports, not 4791, so gopacket would not decode the
// UDP payload as RoCE; the check is done with rocev2 directly.)
func readCapture(t *testing.T, path string) (out, in int) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	r, err := pcap.NewReader(bytes.NewReader(b))
	require.NoError(t, err)
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return out, in
		}
		require.NoError(t, err)
		p := gopacket.NewPacket(rec.Data, layers.LayerTypeEthernet, gopacket.Default)
		ip, _ := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		udp, _ := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
		require.True(t, ip != nil && udp != nil, "%s: a frame is not IPv4/UDP", path)
		src, _ := netip.AddrFromSlice(ip.SrcIP.To4())
		dst, _ := netip.AddrFromSlice(ip.DstIP.To4())
		fl := rocev2.NewFlow(netip.AddrPortFrom(src, uint16(udp.SrcPort)), netip.AddrPortFrom(dst, uint16(udp.DstPort)))
		fl.IPv4ID = ip.Id
		require.True(t, fl.VerifyICRC(udp.Payload), "%s: a frame's ICRC does not verify", path)
		if rec.Direction == pcap.Outbound {
			out++
		} else {
			in++
		}
	}
}

func TestFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "-d LOCAL_ADDR is required"},
		{[]string{"-d", "nope"}, "give an IP address"},
		{[]string{"-d", "127.0.0.1", "-t", "atomic"}, "write, send, read and ud"},
		{[]string{"-d", "127.0.0.1", "-lat", "-all"}, "give one of them"},
		{[]string{"-d", "127.0.0.1", "-n", "5", "-D", "1"}, "give one of them"},
		{[]string{"-d", "127.0.0.1", "-m", "1500"}, "256, 512, 1024, 2048 or 4096"},
		{[]string{"-d", "127.0.0.1", "-p", "0", "127.0.0.2"}, "the client must be told"},
		{[]string{"-d", "127.0.0.1", "a", "b"}, "too many arguments"},
		{[]string{"-d", "127.0.0.1", "-backend", "dpdk"}, "use udp, afpacket, shm or auto"},
		{[]string{"-backend", "afpacket"}, "needs the interface: -i IFACE"},
		{[]string{"-backend", "afpacket", "-d", "127.0.0.1", "-port", "5000"}, "UDP port 4791 only"},
		{[]string{"-i", "nosuch0"}, "-i nosuch0"},
	} {
		_, err := parseFlags(tc.args, io.Discard)
		require.Error(t, err, "%q", tc.args)
		assert.Contains(t, err.Error(), tc.want, "%q", tc.args)
	}
	var stderr bytes.Buffer
	assert.Equal(t, 2, run(context.Background(), []string{"-d"}, io.Discard, &stderr))
	assert.Equal(t, 0, run(context.Background(), []string{"-h"}, io.Discard, &stderr))
}

// A client without a server fails at once, saying what to do.
func TestNoServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close() // nobody listens there now
	var stderr bytes.Buffer
	rc := run(context.Background(), []string{"-d", "127.0.0.2", "-port", "0", "-p", port, "-timeout", "2s", "127.0.0.1"}, io.Discard, &stderr)
	assert.Equal(t, 1, rc)
	assert.Contains(t, stderr.String(), "start it first")
}

// BenchmarkWriteBW measures 64 KiB RDMA WRITEs between two devices over
// loopback UDP in this process, b.N messages per run.
func BenchmarkWriteBW(b *testing.B) {
	out, _ := pair(b, []string{"-json"}, []string{"-t", "write", "-n", strconv.Itoa(max(b.N, 5)), "-raw=false", "-json"})
	var rep report
	require.NoError(b, json.Unmarshal([]byte(out), &rep))
	g := rep.Results[0].GoRoCE
	b.SetBytes(defaultBWSize)
	b.ReportMetric(g.Gbits, "Gbit/s")
	b.ReportMetric(g.MsgRateMpps*1e6, "msgs/s")
}

// A signal (the end of run's context) stops a server that waits for its
// client: it returns, and its device's counter socket is gone.
func TestServerStopsOnSignal(t *testing.T) {
	runDir := t.TempDir()
	t.Setenv("GOROCE_RUN_DIR", runDir)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg, err := parseFlags([]string{"-d", "127.0.0.1", "-p", "0", "-port", "0", "-timeout", "120s"}, io.Discard)
	require.NoError(t, err)
	listening := make(chan net.Addr, 1)
	cfg.onListen = func(a net.Addr) { listening <- a }
	served := make(chan error, 1)
	go func() { served <- runConfig(ctx, cfg, io.Discard, io.Discard) }()
	select {
	case <-listening:
	case err := <-served:
		require.FailNow(t, "the server exited before listening", "%v", err)
	}
	socks, err := filepath.Glob(filepath.Join(runDir, "*.sock"))
	require.NoError(t, err)
	require.Len(t, socks, 1, "the device publishes its counters")

	cancel()
	select {
	case err := <-served:
		require.Error(t, err)
		assert.Contains(t, err.Error(), "stopped while waiting for a client")
	case <-time.After(60 * time.Second): // a hang guard, half the -timeout
		require.FailNow(t, "the server still waits for its client")
	}
	assert.NoFileExists(t, socks[0])
}

// A signal during a test stops the side that got it at once (the test
// asks for ten minutes), and the other side with it, each with its error.
func TestSignalStopsATestInProgress(t *testing.T) {
	for _, who := range []string{"server", "client"} {
		t.Run(who, func(t *testing.T) {
			t.Setenv("GOROCE_RUN_DIR", t.TempDir())
			sctx, scancel := context.WithCancel(context.Background())
			defer scancel()
			cctx, ccancel := context.WithCancel(context.Background())
			defer ccancel()
			scfg, err := parseFlags([]string{"-d", "127.0.0.1", "-p", "0", "-port", "0", "-timeout", "900s"}, io.Discard)
			require.NoError(t, err)
			listening := make(chan net.Addr, 1)
			scfg.onListen = func(a net.Addr) { listening <- a }
			started := &watchWriter{want: "RDMA_Write BW Test", seen: make(chan struct{})}
			served := make(chan error, 1)
			go func() { served <- runConfig(sctx, scfg, started, io.Discard) }()
			addr := <-listening
			ccfg, err := parseFlags([]string{"-d", "127.0.0.2", "-p", strconv.Itoa(addr.(*net.TCPAddr).Port), "-port", "0",
				"-timeout", "900s", "-t", "write", "-D", "600", "-raw=false", "127.0.0.1"}, io.Discard)
			require.NoError(t, err)
			ran := make(chan error, 1)
			go func() { ran <- runConfig(cctx, ccfg, io.Discard, io.Discard) }()
			select {
			case <-started.seen:
			case err := <-served:
				require.FailNow(t, "the server ended before the test started", "%v", err)
			}
			if who == "server" {
				scancel()
			} else {
				ccancel()
			}
			guard := time.After(120 * time.Second) // the test would run 600 s
			for _, ch := range []chan error{served, ran} {
				select {
				case err := <-ch:
					require.Error(t, err)
				case <-guard:
					require.FailNow(t, "still running a test after the signal")
				}
			}
		})
	}
}

// watchWriter closes seen once what was written contains want.
type watchWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
	done bool
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.done && strings.Contains(w.buf.String(), w.want) {
		w.done = true
		close(w.seen)
	}
	return len(p), nil
}
