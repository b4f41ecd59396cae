package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/rxevectors"
	"github.com/goroce/goroce/pcap"
	"github.com/goroce/goroce/rocev2"
)

const vectorDir = "../../conformance/testdata/rxe"

// runDump runs rocedump in process.
func runDump(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// lines splits output into its non-empty lines.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// vectorFrames reads a bundled capture with gopacket's reader.
func vectorFrames(t *testing.T, name string) [][]byte {
	t.Helper()
	out, err := rxevectors.Frames(filepath.Join(vectorDir, name))
	require.NoError(t, err)
	return out
}

// vectorCounts is the number of RoCEv2 packets of each capture (CATALOG.md).
var vectorCounts = rxevectors.RoCECounts

// jsonKeyOrder is the order of every key a RoCE JSON line may have.
var jsonKeyOrder = []string{"frame", "opcode", "opname", "se", "migreq", "padcnt", "tver", "pkey", "fecn", "becn",
	"dqpn", "ackreq", "psn", "reth", "aeth", "atomiceth", "atomicacketh", "immdt", "ieth", "deth", "feth",
	"payload_len", "icrc", "icrc_ok", "src", "dst", "sport", "ttl", "ipid", "df", "flowlabel", "smc", "mad"}

// topKeys returns the top-level keys of a JSON object in order.
func topKeys(t *testing.T, line string) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(line))
	tok, err := dec.Token()
	require.NoError(t, err)
	require.Equal(t, json.Delim('{'), tok)
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		require.NoError(t, err)
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		require.NoError(t, dec.Decode(&skip))
	}
	return keys
}

// -json prints one line per RoCE packet of every bundled capture, with
// keys in a fixed order and values matching an independent rocev2 parse.
func TestJSONVectors(t *testing.T) {
	for name, want := range vectorCounts {
		t.Run(name, func(t *testing.T) {
			code, out, errOut := runDump(t, "-r", filepath.Join(vectorDir, name), "-json")
			require.Equal(t, 0, code, errOut)
			assert.Empty(t, errOut)
			roce, other := splitJSON(t, out)
			require.Len(t, roce, want)
			for _, l := range other { // SMC CLC over TCP
				assert.Equal(t, []string{"frame", "smc"}, topKeys(t, l))
			}
			frames := vectorFrames(t, name)
			for _, l := range roce {
				var m map[string]any
				dec := json.NewDecoder(strings.NewReader(l))
				dec.UseNumber()
				require.NoError(t, dec.Decode(&m), l)
				assert.Equal(t, true, m["icrc_ok"], l)

				keys := topKeys(t, l)
				var order []string
				for _, k := range jsonKeyOrder {
					if _, ok := m[k]; ok {
						order = append(order, k)
					}
				}
				assert.Equal(t, order, keys, "key order")

				n := num(t, m["frame"])
				require.True(t, n >= 1 && int(n) <= len(frames))
				var f rocev2.Frame
				require.NoError(t, rocev2.ParseEthernetFrame(frames[n-1], rocev2.UDPPort, &f))
				var p rocev2.Packet
				require.NoError(t, p.Parse(f.Payload))
				assert.Equal(t, uint64(p.Opcode()), num(t, m["opcode"]))
				assert.Equal(t, p.Opcode().String(), m["opname"])
				assert.Equal(t, uint64(p.BTH().DestQP()), num(t, m["dqpn"]))
				assert.Equal(t, uint64(p.BTH().PSN()), num(t, m["psn"]))
				assert.Equal(t, p.BTH().AckReq(), m["ackreq"])
				assert.Equal(t, uint64(len(p.Payload())), num(t, m["payload_len"]))
				assert.Equal(t, uint64(p.ICRC()), num(t, m["icrc"]))
				assert.Equal(t, f.Src().String(), m["src"])
				assert.Equal(t, f.Dst().String(), m["dst"])
				assert.Equal(t, uint64(f.SrcPort()), num(t, m["sport"]))
				if f.IP[0]>>4 == 4 {
					assert.Equal(t, uint64(f.IP[8]), num(t, m["ttl"]))
					assert.Equal(t, uint64(binary.BigEndian.Uint16(f.IP[4:])), num(t, m["ipid"]))
					assert.Equal(t, f.IP[6]&0x40 != 0, m["df"])
					assert.Nil(t, m["flowlabel"])
				} else {
					assert.Equal(t, uint64(f.IP[7]), num(t, m["ttl"]))
					assert.Equal(t, uint64(binary.BigEndian.Uint32(f.IP[0:])&0xFFFFF), num(t, m["flowlabel"]))
					assert.Nil(t, m["ipid"])
				}
				assert.Equal(t, p.RETH() != nil, m["reth"] != nil)
				assert.Equal(t, p.AETH() != nil, m["aeth"] != nil)
				assert.Equal(t, p.AtomicETH() != nil, m["atomiceth"] != nil)
				assert.Equal(t, p.AtomicAckETH() != nil, m["atomicacketh"] != nil)
				assert.Equal(t, p.DETH() != nil, m["deth"] != nil)
				if a := p.AETH(); a != nil {
					aeth := m["aeth"].(map[string]any)
					assert.Equal(t, "ack", aeth["kind"])
					assert.Equal(t, uint64(a.MSN()), num(t, aeth["msn"]))
					assert.Equal(t, uint64(a.Syndrome()), num(t, aeth["syndrome"]))
				}
				if r := p.RETH(); r != nil {
					reth := m["reth"].(map[string]any)
					assert.Equal(t, r.VA(), num(t, reth["va"]))
					assert.Equal(t, uint64(r.RKey()), num(t, reth["rkey"]))
					assert.Equal(t, uint64(r.Len()), num(t, reth["len"]))
				}
				if d := p.DETH(); d != nil {
					deth := m["deth"].(map[string]any)
					assert.Equal(t, uint64(d.QKey()), num(t, deth["qkey"]))
					assert.Equal(t, uint64(d.SrcQP()), num(t, deth["sqpn"]))
				}
			}
		})
	}
}

// splitJSON separates -json output into RoCE lines (with an opcode) and
// the frame+smc lines of SMC CLC messages over TCP.
func splitJSON(t *testing.T, out string) (roce, other []string) {
	t.Helper()
	for _, l := range lines(out) {
		var m map[string]json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		if _, ok := m["opcode"]; ok {
			roce = append(roce, l)
		} else {
			other = append(other, l)
		}
	}
	return roce, other
}

// num reads a JSON number as an unsigned integer.
func num(t *testing.T, v any) uint64 {
	t.Helper()
	n, ok := v.(json.Number)
	require.True(t, ok, "%v is not a number", v)
	u, err := parseUint(string(n))
	require.NoError(t, err)
	return u
}

// The text output has one line per RoCE packet, in the documented shape.
func TestTextVectors(t *testing.T) {
	code, out, _ := runDump(t, "-r", filepath.Join(vectorDir, "rc_pingpong_s1024.pcap"))
	require.Equal(t, 0, code)
	ls := lines(out)
	require.Len(t, ls, 20)
	shape := regexp.MustCompile(`^\d+\.\d{6} 198\.18\.0\.1[12]\.49441 > 198\.18\.0\.1[12]\.4791: RC (SEND_ONLY|ACKNOWLEDGE) qp 0x11 psn \d+ .*payload \d+ icrc ok$`)
	for _, l := range ls {
		assert.Regexp(t, shape, l)
	}
	assert.Contains(t, ls[1], "aeth(ACK credits=unlimited msn=1)")

	code, out, _ = runDump(t, "-r", filepath.Join(vectorDir, "ud_pingpong_s512.pcap"), "-tt", "-c", "1")
	require.Equal(t, 0, code)
	assert.Regexp(t, `^17\d{8}\.\d{6} .* UD SEND_ONLY qp 0x\w+ psn \d+ .*deth\(qkey=0x11111111 sqpn=0x\w+\) payload 512 icrc ok$`, lines(out)[0])
}

// -stats on smcr_close.pcap finds the 14 retransmissions CATALOG.md lists.
func TestStatsRetransmissions(t *testing.T) {
	code, out, _ := runDump(t, "-r", filepath.Join(vectorDir, "smcr_close.pcap"), "-stats", "-q")
	require.Equal(t, 0, code)
	ls := lines(out)
	require.Len(t, ls, 4, out) // header, two QPs, total
	assert.Equal(t, []string{"total", "111", "5216", "14", "0", "0"}, strings.Fields(ls[3]))
	assert.Equal(t, []string{"198.18.0.11", "0x11", "63", "3036", "14", "0", "0"}, strings.Fields(ls[1]))

	// Without -q the table follows the packet lines.
	code, out, _ = runDump(t, "-r", filepath.Join(vectorDir, "read_bw.pcap"), "-stats")
	require.Equal(t, 0, code)
	ls = lines(out)
	require.Len(t, ls, 25+4)
	assert.Equal(t, []string{"total", "25", "0", "0", "0"}, append(strings.Fields(ls[len(ls)-1])[:2], strings.Fields(ls[len(ls)-1])[3:]...))
}

// The filter flags select packets by QP, opcode and host, and -c stops.
func TestFilters(t *testing.T) {
	readBW := filepath.Join(vectorDir, "read_bw.pcap")
	rping := filepath.Join(vectorDir, "rping.pcap")
	tests := []struct {
		args []string
		want int
	}{
		{[]string{"-r", readBW}, 25},
		{[]string{"-r", readBW, "-op", "RDMA_READ_REQUEST"}, 5},
		{[]string{"-r", readBW, "-op", "0x0e"}, 10},
		{[]string{"-r", readBW, "-op", "rc rdma-read-response-first,15"}, 10},
		{[]string{"-r", readBW, "-op", "UD"}, 0},
		{[]string{"-r", readBW, "-host", "198.18.0.12"}, 25},
		{[]string{"-r", readBW, "-host", "10.0.0.1"}, 0},
		{[]string{"-r", readBW, "-qp", "0x16"}, 25},
		{[]string{"-r", readBW, "-qp", "23"}, 0},
		{[]string{"-r", readBW, "-c", "3"}, 3},
		{[]string{"-r", readBW, "-c", "3", "-json"}, 3},
		{[]string{"-r", rping, "-op", "UD"}, 5},
		{[]string{"-r", rping, "-qp", "1"}, 5},
		{[]string{"-r", rping, "-op", "SEND_ONLY"}, 17},
		{[]string{"-r", rping, "-op", "ACKNOWLEDGE", "-json"}, 15},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args[2:], " "), func(t *testing.T) {
			code, out, errOut := runDump(t, tt.args...)
			require.Equal(t, 0, code, errOut)
			assert.Len(t, lines(out), tt.want)
		})
	}
}

// Bad flags exit 2, unreadable input 1.
func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	notCapture := filepath.Join(dir, "text.pcap")
	require.NoError(t, os.WriteFile(notCapture, []byte("hello, this is not a capture"), 0o644))
	tests := []struct {
		args []string
		want int
	}{
		{nil, 2},
		{[]string{"-r"}, 2},
		{[]string{"-r", "x", "extra"}, 2},
		{[]string{"-r", "x", "-qp", "zzz"}, 2},
		{[]string{"-r", "x", "-qp", "0x1000000"}, 2},
		{[]string{"-r", "x", "-op", "NOT_AN_OPCODE"}, 2},
		{[]string{"-r", "x", "-host", "300.1.1.1"}, 2},
		{[]string{"-r", "x", "-c", "-1"}, 2},
		{[]string{"-nosuchflag"}, 2},
		{[]string{"-h"}, 0},
		{[]string{"-r", filepath.Join(dir, "missing.pcap")}, 1},
		{[]string{"-r", notCapture}, 1},
	}
	for _, tt := range tests {
		code, _, errOut := runDump(t, tt.args...)
		assert.Equal(t, tt.want, code, "%v: %s", tt.args, errOut)
	}
}

// A capture file cut inside a record prints what it can, then exits 1.
func TestTruncatedFile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(vectorDir, "rc_pingpong_s1024.pcap"))
	require.NoError(t, err)
	name := filepath.Join(t.TempDir(), "cut.pcap")
	require.NoError(t, os.WriteFile(name, b[:len(b)-30], 0o644))
	code, out, errOut := runDump(t, "-r", name, "-stats")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "frame 42")
	assert.Len(t, lines(out), 20+4) // the lost last frame is not RoCE; the table is still printed
}

// A capture whose record claims 4 GiB (the file's snapshot length says
// 4 GiB too) is an error at that frame, after the frames before it, and
// costs far less than 4 GiB: the reader checks the claim first.
func TestRecordClaiming4GiB(t *testing.T) {
	var frame []byte
	for _, f := range vectorFrames(t, "rc_pingpong_s1024.pcap") {
		if gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default).Layer(pcap.LayerTypeBTH) != nil {
			frame = f
			break
		}
	}
	require.NotNil(t, frame)
	le := binary.LittleEndian
	b := le.AppendUint32(nil, 0xa1b2c3d4)
	b = le.AppendUint16(b, 2)
	b = le.AppendUint16(b, 4)
	b = le.AppendUint64(b, 0)
	b = le.AppendUint32(b, 0xFFFFFFFF) // snaplen
	b = le.AppendUint32(b, uint32(layers.LinkTypeEthernet))
	for _, n := range []uint32{uint32(len(frame)), 0xFFFFFFFF} {
		b = le.AppendUint64(b, 0)
		b = le.AppendUint32(b, n)
		b = le.AppendUint32(b, n)
		b = append(b, frame...)
	}
	name := filepath.Join(t.TempDir(), "huge.pcap")
	require.NoError(t, os.WriteFile(name, b, 0o644))

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	code, out, errOut := runDump(t, "-r", name)
	runtime.ReadMemStats(&after)
	assert.Equal(t, 1, code)
	assert.Len(t, lines(out), 1, "the frame before the lie is printed")
	assert.Contains(t, errOut, "frame 2: pcap: a record claims 4294967295 captured bytes, more than the 262144 bytes this reader accepts")
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(16<<20), "bytes allocated")
}

// writeCapture writes frames to a capture file in dir.
func writeCapture(t *testing.T, opts pcap.WriterOptions, frames ...[]byte) string {
	t.Helper()
	name := filepath.Join(t.TempDir(), "test."+opts.Format.String())
	fh, err := os.Create(name)
	require.NoError(t, err)
	w, err := pcap.NewWriter(fh, opts)
	require.NoError(t, err)
	ts := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, f := range frames {
		require.NoError(t, w.WriteFrame(ts.Add(time.Duration(i)*time.Millisecond), pcap.Inbound, f))
	}
	require.NoError(t, w.Close())
	require.NoError(t, fh.Close())
	return name
}

// Truncated and malformed RoCE frames are reported on lines of their own
// and the dump goes on; non-RoCE frames are skipped silently.
func TestMalformedNotFatal(t *testing.T) {
	frames := vectorFrames(t, "rc_pingpong_s1024.pcap")
	var roce, other [][]byte
	for _, f := range frames {
		var fr rocev2.Frame
		if rocev2.ParseEthernetFrame(f, rocev2.UDPPort, &fr) == nil {
			roce = append(roce, f)
		} else {
			other = append(other, f)
		}
	}
	const udpPayload = rocev2.EthernetHeaderLen + rocev2.IPv4HeaderLen + rocev2.UDPHeaderLen
	cut := roce[1][:udpPayload+6] // IP and UDP lengths promise more
	badOp := append([]byte(nil), roce[2]...)
	badOp[udpPayload] = 0x15 // reserved opcode
	name := writeCapture(t, pcap.WriterOptions{}, roce[0], cut, other[0], badOp, roce[3])

	code, out, errOut := runDump(t, "-r", name)
	require.Equal(t, 0, code, errOut)
	ls := lines(out)
	require.Len(t, ls, 4, out)
	assert.Contains(t, ls[0], "icrc ok")
	assert.Equal(t, "frame 2: malformed RoCE: "+rocev2.ErrShort.Error(), ls[1])
	assert.Equal(t, "frame 4: malformed RoCE: "+rocev2.ErrUnknownOpcode.Error(), ls[2])
	assert.Contains(t, ls[3], "icrc ok")

	// With -json stdout stays JSON; the reports go to stderr.
	code, out, errOut = runDump(t, "-r", name, "-json")
	require.Equal(t, 0, code)
	ls = lines(out)
	require.Len(t, ls, 2)
	assert.True(t, strings.HasPrefix(ls[0], `{"frame":1,`))
	assert.True(t, strings.HasPrefix(ls[1], `{"frame":5,`))
	assert.Equal(t, []string{"frame 2: malformed RoCE: " + rocev2.ErrShort.Error(),
		"frame 4: malformed RoCE: " + rocev2.ErrUnknownOpcode.Error()}, lines(errOut))

	// A frame the capture cut short (snap length) is reported too.
	name = writeCapture(t, pcap.WriterOptions{Format: pcap.FormatPCAP, SnapLen: 70}, roce[0])
	code, out, _ = runDump(t, "-r", name)
	require.Equal(t, 0, code)
	assert.Equal(t, []string{"frame 1: malformed RoCE: capture truncated to 70 of " + itoa(len(roce[0])) + " bytes"}, lines(out))
}

// pcapng input (as goroce writes it) dumps the same as the pcap original.
func TestPcapngInput(t *testing.T) {
	frames := vectorFrames(t, "smcr_echo_small.pcap")
	ng := writeCapture(t, pcap.WriterOptions{}, frames...)
	_, fromNg, _ := runDump(t, "-r", ng, "-json")
	_, fromPcap, _ := runDump(t, "-r", filepath.Join(vectorDir, "smcr_echo_small.pcap"), "-json")
	assert.Equal(t, fromPcap, fromNg)
	roce, _ := splitJSON(t, fromNg)
	assert.Len(t, roce, 74)
}

// A RoCE packet over IPv6 prints with IPv6 addresses and a verified ICRC;
// a resealed ICRC that does not match is reported BAD.
func TestIPv6AndBadICRC(t *testing.T) {
	var buf bytes.Buffer
	w, err := pcap.NewWriter(&buf, pcap.WriterOptions{})
	require.NoError(t, err)
	flow := rocev2.NewFlow(mustAddrPort("[2001:db8::1]:50000"), mustAddrPort("[2001:db8::2]:4791"))
	f := rocev2.Fields{Opcode: rocev2.RCWriteOnlyImm, DestQP: 0x42, PSN: 7, AckReq: true, VA: 0x1000, RKey: 0x99, Len: 3, Imm: 0xAABBCCDD}
	pkt, err := f.Append(nil, []byte("abc"))
	require.NoError(t, err)
	flow.SealICRC(pkt)
	require.NoError(t, w.WriteRoCE(time.Unix(1, 0), pcap.Outbound, &flow, pkt))
	pkt[len(pkt)-1] ^= 0xFF
	require.NoError(t, w.WriteRoCE(time.Unix(2, 0), pcap.Outbound, &flow, pkt))
	require.NoError(t, w.Close())
	name := filepath.Join(t.TempDir(), "v6.pcapng")
	require.NoError(t, os.WriteFile(name, buf.Bytes(), 0o644))

	code, out, _ := runDump(t, "-r", name)
	require.Equal(t, 0, code)
	assert.Equal(t, []string{
		"0.000000 2001:db8::1.50000 > 2001:db8::2.4791: RC RDMA_WRITE_ONLY_WITH_IMMEDIATE qp 0x42 psn 7 ackreq pkey 0x0000 reth(va=0x1000 rkey=0x99 len=3) immdt=0xaabbccdd payload 3 icrc ok",
		"1.000000 2001:db8::1.50000 > 2001:db8::2.4791: RC RDMA_WRITE_ONLY_WITH_IMMEDIATE qp 0x42 psn 7 ackreq pkey 0x0000 reth(va=0x1000 rkey=0x99 len=3) immdt=0xaabbccdd payload 3 icrc BAD",
	}, lines(out))
	code, out, _ = runDump(t, "-r", name, "-json", "-c", "1")
	require.Equal(t, 0, code)
	assert.Contains(t, out, `"reth":{"va":4096,"rkey":153,"len":3},"immdt":2864434397,"payload_len":3,`)
	assert.Contains(t, out, `"src":"2001:db8::1","dst":"2001:db8::2","sport":50000,"ttl":`)
	assert.Regexp(t, `"ttl":64,"flowlabel":0}`, out)
	assert.NotContains(t, out, `"ipid"`)
}

// SMC messages that the SMC hooks find are printed: under "smc" in a RoCE
// line, and as frame+smc lines for TCP frames (CLC).
func TestSMCHooks(t *testing.T) {
	oldJSON, oldSummary := smcJSONFunc, smcSummaryFunc
	t.Cleanup(func() { smcJSONFunc, smcSummaryFunc = oldJSON, oldSummary })
	smcJSONFunc = func(p gopacket.Packet) any {
		if tcp, ok := p.Layer(layers.LayerTypeTCP).(*layers.TCP); ok && len(tcp.Payload) > 0 {
			return map[string]any{"clc": len(tcp.Payload)}
		}
		if b, ok := p.Layer(pcap.LayerTypeBTH).(*pcap.BTH); ok && len(b.Packet().Payload()) > 0 {
			return map[string]any{"llc": true}
		}
		return nil
	}
	smcSummaryFunc = func(p gopacket.Packet) string {
		if v := smcJSONFunc(p); v != nil {
			return "msg"
		}
		return ""
	}
	name := filepath.Join(vectorDir, "smc_r_v2.pcap") // CLC only: no RoCE
	code, out, _ := runDump(t, "-r", name, "-json")
	require.Equal(t, 0, code)
	ls := lines(out)
	require.NotEmpty(t, ls)
	for _, l := range ls {
		assert.Equal(t, []string{"frame", "smc"}, topKeys(t, l))
	}
	code, out, _ = runDump(t, "-r", name)
	require.Equal(t, 0, code)
	for _, l := range lines(out) {
		assert.Regexp(t, `^\d+\.\d{6} 198\.18\.0\.1[12]\.\d+ > 198\.18\.0\.1[12]\.\d+: TCP smc msg$`, l)
	}
	_, out, _ = runDump(t, "-r", name, "-json", "-qp", "1")
	assert.Empty(t, out)

	_, out, _ = runDump(t, "-r", filepath.Join(vectorDir, "rc_pingpong_s1024.pcap"), "-json", "-op", "SEND_ONLY", "-c", "1")
	assert.Regexp(t, `"icrc_ok":true,"src":"198\.18\.0\.1[12]","dst":"198\.18\.0\.1[12]","sport":\d+,"ttl":\d+,"ipid":\d+,"df":true,"smc":\{"llc":true\}\}`, out)
}

// The reader's Next loop and the scanner agree on frame numbers: every
// frame number in -json output points at a RoCE frame.
func TestFrameNumbersCountAllFrames(t *testing.T) {
	code, out, _ := runDump(t, "-r", filepath.Join(vectorDir, "rc_pingpong_s1024.pcap"), "-json")
	require.Equal(t, 0, code)
	frames := vectorFrames(t, "rc_pingpong_s1024.pcap")
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var v struct{ Frame int }
		require.NoError(t, json.Unmarshal(sc.Bytes(), &v))
		var fr rocev2.Frame
		assert.NoError(t, rocev2.ParseEthernetFrame(frames[v.Frame-1], rocev2.UDPPort, &fr))
	}
}

func parseUint(s string) (uint64, error) { return strconv.ParseUint(s, 10, 64) }

func itoa(n int) string { return strconv.Itoa(n) }

func mustAddrPort(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }
