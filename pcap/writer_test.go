package pcap

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/goroce/goroce/internal/race"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/rocev2"
)

// readAll reads every record of a capture with our Reader.
func readAll(t *testing.T, b []byte) (*Reader, []Record) {
	t.Helper()
	r, err := NewReader(bytes.NewReader(b))
	require.NoError(t, err)
	var out []Record
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return r, out
		}
		require.NoError(t, err)
		out = append(out, rec)
	}
}

// t0 has nanoseconds, to check that both formats keep them.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)

// Frames written in either format read back byte for byte with their
// timestamps, with our reader and with gopacket's; pcapng keeps direction
// and comments.
func TestWriterRoundTrip(t *testing.T) {
	frames := vectorFrames(t)["rc_pingpong_s1024.pcap"]
	for _, format := range []Format{FormatPCAPNG, FormatPCAP} {
		t.Run(format.String(), func(t *testing.T) {
			var buf bytes.Buffer
			w, err := NewWriter(&buf, WriterOptions{Format: format, Description: "test capture"})
			require.NoError(t, err)
			dirs := []Direction{Inbound, Outbound, DirectionUnknown}
			for i, f := range frames {
				ts := t0.Add(time.Duration(i) * time.Microsecond)
				if i%4 == 3 {
					require.NoError(t, w.WriteFrameComment(ts, dirs[i%3], f, fmt.Sprintf("frame %d", i+1)))
				} else {
					require.NoError(t, w.WriteFrame(ts, dirs[i%3], f))
				}
			}
			require.NoError(t, w.Close())

			r, recs := readAll(t, buf.Bytes())
			assert.Equal(t, format, r.Format())
			assert.Equal(t, layers.LinkTypeEthernet, r.LinkType())
			require.Len(t, recs, len(frames))
			for i, rec := range recs {
				assert.Equal(t, frames[i], rec.Data)
				assert.Equal(t, len(frames[i]), rec.Length)
				assert.True(t, t0.Add(time.Duration(i)*time.Microsecond).Equal(rec.Time), "%v", rec.Time)
				assert.Equal(t, layers.LinkTypeEthernet, rec.LinkType)
				if format == FormatPCAPNG {
					assert.Equal(t, dirs[i%3], rec.Direction)
					if i%4 == 3 {
						assert.Equal(t, fmt.Sprintf("frame %d", i+1), rec.Comment)
					} else {
						assert.Empty(t, rec.Comment)
					}
				} else {
					assert.Equal(t, DirectionUnknown, rec.Direction)
				}
			}

			// gopacket's readers agree.
			var src gopacket.PacketDataSource
			if format == FormatPCAPNG {
				ng, err := pcapgo.NewNgReader(bytes.NewReader(buf.Bytes()), pcapgo.DefaultNgReaderOptions)
				require.NoError(t, err)
				intf, err := ng.Interface(0)
				require.NoError(t, err)
				assert.Equal(t, DefaultInterfaceName, intf.Name)
				assert.Equal(t, "test capture", intf.Description)
				src = ng
			} else {
				c, err := pcapgo.NewReader(bytes.NewReader(buf.Bytes()))
				require.NoError(t, err)
				src = c
			}
			for i := range frames {
				data, ci, err := src.ReadPacketData()
				require.NoError(t, err)
				assert.Equal(t, frames[i], data)
				assert.True(t, t0.Add(time.Duration(i)*time.Microsecond).Equal(ci.Timestamp))
			}
			_, _, err = src.ReadPacketData()
			assert.Equal(t, io.EOF, err)
		})
	}
}

// Packets written by WriteRoCE, over IPv4 and IPv6 and in both formats,
// decode to Ethernet/IP/UDP/BTH with a valid ICRC, IPv4 header checksum and
// zero UDP checksum.
func TestWriteRoCEDecodes(t *testing.T) {
	for _, format := range []Format{FormatPCAPNG, FormatPCAP} {
		for fname, flow := range testFlows() {
			t.Run(format.String()+"/"+fname, func(t *testing.T) {
				var buf bytes.Buffer
				w, err := NewWriter(&buf, WriterOptions{Format: format})
				require.NoError(t, err)
				var pkts [][]byte
				for _, op := range validOpcodes() {
					payload := testPayload(op)
					f := testFields(op, len(payload))
					pkt, err := f.Append(nil, payload)
					require.NoError(t, err)
					flow.SealICRC(pkt)
					pkts = append(pkts, pkt)
					require.NoError(t, w.WriteRoCE(t0, Outbound, &flow, pkt))
				}
				require.NoError(t, w.Flush())

				_, recs := readAll(t, buf.Bytes())
				require.Len(t, recs, len(pkts))
				netType := layers.LayerTypeIPv4
				if flow.IsIPv6() {
					netType = layers.LayerTypeIPv6
				}
				for i, rec := range recs {
					p := gopacket.NewPacket(rec.Data, rec.LinkType, gopacket.Default)
					require.Nil(t, p.ErrorLayer())
					ls := p.Layers()
					require.GreaterOrEqual(t, len(ls), 4)
					assert.Equal(t, []gopacket.LayerType{layers.LayerTypeEthernet, netType, layers.LayerTypeUDP, LayerTypeBTH},
						[]gopacket.LayerType{ls[0].LayerType(), ls[1].LayerType(), ls[2].LayerType(), ls[3].LayerType()})
					udp := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
					assert.Equal(t, pkts[i], udp.Payload)
					assert.Zero(t, udp.Checksum)
					if ip4, ok := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4); ok {
						assert.Zero(t, rocev2.IPv4Checksum(ip4.Contents), "IPv4 header checksum")
					}
					ok, verifiable := VerifyICRC(p)
					assert.True(t, verifiable)
					assert.True(t, ok)
				}
			})
		}
	}
}

// A received packet whose ICRC was computed for an IPv4 ID the writer does
// not know verifies only when the writer reseals it, and the caller's
// buffer is left alone.
func TestWriteRoCEReseal(t *testing.T) {
	flow := testFlows()["ipv4"]
	sender := flow
	sender.IPv4ID = 0x7777 // the ID the real IP header carried
	f := testFields(rocev2.RCSendOnly, 5)
	pkt, err := f.Append(nil, []byte("hello"))
	require.NoError(t, err)
	sender.SealICRC(pkt)
	orig := append([]byte(nil), pkt...)

	for _, reseal := range []bool{false, true} {
		for _, format := range []Format{FormatPCAPNG, FormatPCAP} {
			var buf bytes.Buffer
			w, err := NewWriter(&buf, WriterOptions{Format: format, ResealICRC: reseal})
			require.NoError(t, err)
			require.NoError(t, w.WriteRoCE(t0, Inbound, &flow, pkt))
			require.NoError(t, w.Close())
			assert.Equal(t, orig, pkt)
			_, recs := readAll(t, buf.Bytes())
			require.Len(t, recs, 1)
			ok, verifiable := VerifyICRC(gopacket.NewPacket(recs[0].Data, layers.LinkTypeEthernet, gopacket.Default))
			assert.True(t, verifiable)
			assert.Equal(t, reseal, ok, "reseal=%v %v", reseal, format)
		}
	}

	w, err := NewWriter(io.Discard, WriterOptions{ResealICRC: true})
	require.NoError(t, err)
	assert.ErrorIs(t, w.WriteRoCE(t0, Inbound, &flow, pkt[:8]), ErrPacketSize)
	assert.ErrorIs(t, w.WriteRoCE(t0, Inbound, &flow, make([]byte, 70000)), ErrPacketSize)
}

// SnapLen truncates the captured bytes and keeps the original length.
func TestWriterSnapLen(t *testing.T) {
	flow := testFlows()["ipv6"]
	f := testFields(rocev2.RCSendOnly, 200)
	pkt, err := f.Append(nil, make([]byte, 200))
	require.NoError(t, err)
	wire := frameFor(&flow, pkt)
	for _, format := range []Format{FormatPCAPNG, FormatPCAP} {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, WriterOptions{Format: format, SnapLen: 97})
		require.NoError(t, err)
		require.NoError(t, w.WriteRoCE(t0, Inbound, &flow, pkt))
		require.NoError(t, w.Close())
		_, recs := readAll(t, buf.Bytes())
		require.Len(t, recs, 1)
		assert.Equal(t, wire[:97], recs[0].Data, format.String())
		assert.Equal(t, len(wire), recs[0].Length, format.String())
	}
}

// WriteRoCE does not allocate once the writer is running.
func TestWriteRoCEDoesNotAllocate(t *testing.T) {
	if race.Enabled {
		t.Skip("the race detector allocates; make test runs this without it")
	}
	flow := testFlows()["ipv4"]
	f := testFields(rocev2.RCWriteOnly, 1024)
	pkt, err := f.Append(nil, make([]byte, 1024))
	require.NoError(t, err)
	for _, format := range []Format{FormatPCAPNG, FormatPCAP} {
		for _, reseal := range []bool{false, true} {
			w, err := NewWriter(io.Discard, WriterOptions{Format: format, ResealICRC: reseal})
			require.NoError(t, err)
			require.NoError(t, w.WriteRoCEComment(t0, Inbound, &flow, pkt, "warm up"))
			allocs := testing.AllocsPerRun(100, func() {
				_ = w.WriteRoCEComment(t0, Inbound, &flow, pkt, "retransmission")
			})
			assert.Zero(t, allocs, "%v reseal=%v", format, reseal)
		}
	}
}

// Concurrent writers interleave whole records.
func TestWriterConcurrent(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, WriterOptions{})
	require.NoError(t, err)
	flows := testFlows()
	const writers, each = 8, 50
	var wg sync.WaitGroup
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			flow := flows["ipv4"]
			if g%2 == 1 {
				flow = flows["ipv6"]
			}
			f := testFields(rocev2.RCSendOnly, g)
			for i := range each {
				f.PSN = rocev2.PSN(i)
				pkt, _ := f.Append(nil, make([]byte, g))
				flow.SealICRC(pkt)
				assert.NoError(t, w.WriteRoCE(time.Now(), Outbound, &flow, pkt))
				if i%10 == 0 {
					assert.NoError(t, w.WriteFrame(time.Now(), Inbound, frameFor(&flow, pkt)))
				}
			}
		}()
	}
	wg.Wait()
	require.NoError(t, w.Close())
	assert.ErrorIs(t, w.WriteFrame(t0, Inbound, []byte{1}), ErrWriterClosed)
	assert.NoError(t, w.Close())

	_, recs := readAll(t, buf.Bytes())
	assert.Len(t, recs, writers*each+writers*each/10)
	for _, rec := range recs {
		ok, verifiable := VerifyICRC(gopacket.NewPacket(rec.Data, rec.LinkType, gopacket.Default))
		require.True(t, verifiable && ok)
	}
}
