package pcap

import (
	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/goroce/goroce/rocev2"
)

// Layer types of RoCEv2, numbered 1700-1719 (see dispatch.go). They are
// constants so that they can be switched on; init registers them with
// gopacket once and binds UDP port 4791 to LayerTypeBTH, so that
// gopacket.NewPacket decodes RoCEv2 frames.
const (
	LayerTypeBTH          gopacket.LayerType = 1700 // Base Transport Header (with pad and ICRC trailer)
	LayerTypeDETH         gopacket.LayerType = 1701 // Datagram ETH (UD)
	LayerTypeFETH         gopacket.LayerType = 1702 // Flush ETH
	LayerTypeRETH         gopacket.LayerType = 1703 // RDMA ETH (remote buffer)
	LayerTypeAtomicETH    gopacket.LayerType = 1704 // Atomic ETH (CmpSwap, FetchAdd)
	LayerTypeAETH         gopacket.LayerType = 1705 // ACK ETH
	LayerTypeAtomicAckETH gopacket.LayerType = 1706 // Atomic ACK ETH
	LayerTypeImmDt        gopacket.LayerType = 1707 // Immediate data
	LayerTypeIETH         gopacket.LayerType = 1708 // Invalidate ETH
	LayerTypeCNPPad       gopacket.LayerType = 1709 // the 16 reserved bytes of a CNP
)

func init() {
	register := func(lt gopacket.LayerType, name string, dec func([]byte, gopacket.PacketBuilder) error) {
		gopacket.RegisterLayerType(int(lt), gopacket.LayerTypeMetadata{Name: name, Decoder: gopacket.DecodeFunc(dec)})
	}
	register(LayerTypeBTH, "BTH", decodeBTH)
	register(LayerTypeDETH, "DETH", decodeExt[DETH])
	register(LayerTypeFETH, "FETH", decodeExt[FETH])
	register(LayerTypeRETH, "RETH", decodeExt[RETH])
	register(LayerTypeAtomicETH, "AtomicETH", decodeExt[AtomicETH])
	register(LayerTypeAETH, "AETH", decodeExt[AETH])
	register(LayerTypeAtomicAckETH, "AtomicAckETH", decodeExt[AtomicAckETH])
	register(LayerTypeImmDt, "ImmDt", decodeExt[ImmDt])
	register(LayerTypeIETH, "IETH", decodeExt[IETH])
	register(LayerTypeCNPPad, "CNPPad", decodeExt[CNPPad])
	layers.RegisterUDPPortLayerType(rocev2.UDPPort, LayerTypeBTH)
}

// IsRoCELayerType reports whether lt is the BTH or one of the extended
// header layer types.
func IsRoCELayerType(lt gopacket.LayerType) bool {
	return lt >= LayerTypeBTH && lt <= LayerTypeCNPPad
}

// extKinds lists the extended headers in wire order, which is also the
// ascending bit order of rocev2.Headers.
var extKinds = [...]struct {
	hdr rocev2.Headers
	lt  gopacket.LayerType
	new func() extLayer
}{
	{rocev2.HdrDETH, LayerTypeDETH, func() extLayer { return new(DETH) }},
	{rocev2.HdrFETH, LayerTypeFETH, func() extLayer { return new(FETH) }},
	{rocev2.HdrRETH, LayerTypeRETH, func() extLayer { return new(RETH) }},
	{rocev2.HdrAtomicETH, LayerTypeAtomicETH, func() extLayer { return new(AtomicETH) }},
	{rocev2.HdrAETH, LayerTypeAETH, func() extLayer { return new(AETH) }},
	{rocev2.HdrAtomicAckETH, LayerTypeAtomicAckETH, func() extLayer { return new(AtomicAckETH) }},
	{rocev2.HdrImmDt, LayerTypeImmDt, func() extLayer { return new(ImmDt) }},
	{rocev2.HdrIETH, LayerTypeIETH, func() extLayer { return new(IETH) }},
	{rocev2.HdrCNPPad, LayerTypeCNPPad, func() extLayer { return new(CNPPad) }},
}

// nextLayerAfter returns the layer that follows header after (0 for the
// BTH) in a packet of opcode op: the next extended header the opcode
// carries, or the payload's decoder as chosen by roceNextLayer.
func nextLayerAfter(op rocev2.Opcode, dqpn uint32, after rocev2.Headers, payload []byte) gopacket.LayerType {
	for _, k := range extKinds {
		if k.hdr > after && op.Has(k.hdr) {
			return k.lt
		}
	}
	return roceNextLayer(op, dqpn, payload)
}

// BTH is the RoCEv2 Base Transport Header as a gopacket layer. Its
// LayerContents are the 12 BTH bytes; its LayerPayload is everything up to
// the pad: the extended headers and the payload. The pad and the ICRC
// trailer are split off into Pad and ICRC.
//
// Decoding goes through rocev2.Packet.Parse, so a BTH layer exists only for
// a packet goroce itself would accept (known opcode, TVer 0, consistent
// lengths); anything else becomes a gopacket.DecodeFailure.
type BTH struct {
	layers.BaseLayer
	// Opcode is the 'OpCode' field: transport (RC, UC, UD, CNP) and operation.
	Opcode rocev2.Opcode
	// SE is the 'Solicited Event' bit.
	SE bool
	// MigReq is the 'MigReq' bit of automatic path migration.
	MigReq bool
	// PadCount is the 'PadCnt' field: bytes of pad after the payload (0..3).
	PadCount uint8
	// TVer is the 'Transport Header Version' field (always 0).
	TVer uint8
	// PKey is the 'Partition Key' field.
	PKey uint16
	// FECN is the 'Forward ECN' bit.
	FECN bool
	// BECN is the 'Backward ECN' bit.
	BECN bool
	// Resv6 holds the six reserved bits of byte 4, kept for faithful re-serialisation.
	Resv6 uint8
	// DestQP is the 24-bit 'Destination QP' field.
	DestQP uint32
	// AckReq is the 'Acknowledge Request' bit.
	AckReq bool
	// Resv7 holds the seven reserved bits of byte 8.
	Resv7 uint8
	// PSN is the 24-bit 'Packet Sequence Number'.
	PSN rocev2.PSN
	// Pad is the pad after the payload (a view into the packet).
	Pad []byte
	// ICRC is the invariant CRC trailer as received: the last four bytes of
	// the UDP payload read least-significant byte first, as the CRC is sent.
	// Whether it matches needs the IP and UDP headers: see VerifyICRC.
	ICRC uint32

	pkt rocev2.Packet
	// icrcNet and icrcUDP, when set, let SerializeTo compute the ICRC.
	icrcNet gopacket.NetworkLayer
	icrcUDP *layers.UDP
}

// LayerType returns LayerTypeBTH.
func (b *BTH) LayerType() gopacket.LayerType { return LayerTypeBTH }

// CanDecode returns LayerTypeBTH.
func (b *BTH) CanDecode() gopacket.LayerClass { return LayerTypeBTH }

// NextLayerType returns the first extended header the opcode carries, or the
// payload's decoder.
func (b *BTH) NextLayerType() gopacket.LayerType {
	if b.pkt.Bytes() == nil { // not decoded
		return gopacket.LayerTypeZero
	}
	return nextLayerAfter(b.Opcode, b.DestQP, 0, b.pkt.Payload())
}

// Packet returns the rocev2 view of the decoded packet (BTH through ICRC),
// from which every header can be read without another parse. It is the
// zero Packet if decoding failed.
func (b *BTH) Packet() *rocev2.Packet { return &b.pkt }

// DecodeFromBytes decodes a UDP payload, BTH through ICRC, with
// rocev2.Packet.Parse. Short input is reported through df.SetTruncated.
func (b *BTH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	*b = BTH{}
	if err := b.pkt.Parse(data); err != nil {
		if err == rocev2.ErrShort || err == rocev2.ErrHeaderTruncated {
			df.SetTruncated()
		}
		return err
	}
	h := b.pkt.BTH()
	b.Opcode = h.Opcode()
	b.SE, b.MigReq = h.SE(), h.MigReq()
	b.PadCount, b.TVer = uint8(h.PadCount()), h.TVer()
	b.PKey = h.PKey()
	b.FECN, b.BECN = h.FECN(), h.BECN()
	b.DestQP = h.DestQP()
	b.AckReq = h.AckReq()
	b.Resv6, b.Resv7 = h.Reserved()
	b.PSN = h.PSN()
	b.Pad = b.pkt.Pad()
	b.ICRC = b.pkt.ICRC()
	end := b.pkt.HeaderLen() + len(b.pkt.Payload())
	b.BaseLayer = layers.BaseLayer{Contents: data[:rocev2.BTHLen], Payload: data[rocev2.BTHLen:end]}
	return nil
}

// SetNetworkLayerForICRC tells SerializeTo the IP and UDP layers the packet
// travels in, so that with SerializeOptions.ComputeChecksums it writes the
// ICRC for them (like layers.UDP.SetNetworkLayerForChecksum). The IP layer
// must be a *layers.IPv4 without options or a *layers.IPv6 without
// extension headers; the UDP length is taken from the serialised packet.
func (b *BTH) SetNetworkLayerForICRC(ip gopacket.NetworkLayer, udp *layers.UDP) {
	b.icrcNet, b.icrcUDP = ip, udp
}

// SerializeTo prepends the BTH and appends the pad and ICRC to the headers
// and payload already in buf. With opts.FixLengths the pad count is derived
// from the payload; with opts.ComputeChecksums and a network layer set by
// SetNetworkLayerForICRC the ICRC is computed, otherwise the ICRC field is
// written as it is.
func (b *BTH) SerializeTo(buf gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	rest := len(buf.Bytes()) // extended headers and payload: headers are multiples of 4
	pad := int(b.PadCount & 3)
	if opts.FixLengths {
		pad = rocev2.PadFor(rest)
		b.PadCount = uint8(pad)
	}
	h, err := buf.PrependBytes(rocev2.BTHLen)
	if err != nil {
		return err
	}
	clear(h) // PrependBytes does not zero its bytes
	bth := rocev2.BTH(h)
	bth.SetOpcode(b.Opcode)
	bth.SetSE(b.SE)
	bth.SetMigReq(b.MigReq)
	bth.SetPadCount(pad)
	bth.SetTVer(b.TVer)
	bth.SetPKey(b.PKey)
	bth.SetFECN(b.FECN)
	bth.SetBECN(b.BECN)
	h[4] |= b.Resv6 & 0x3F
	bth.SetDestQP(b.DestQP)
	bth.SetAckReq(b.AckReq)
	h[8] |= b.Resv7 & 0x7F
	bth.SetPSN(b.PSN)
	t, err := buf.AppendBytes(pad + rocev2.ICRCLen)
	if err != nil {
		return err
	}
	clear(t[:pad])
	if len(b.Pad) == pad {
		copy(t, b.Pad)
	}
	pkt := buf.Bytes()
	crc := b.ICRC
	if opts.ComputeChecksums && b.icrcNet != nil {
		flow, err := flowForICRC(b.icrcNet, b.icrcUDP)
		if err != nil {
			return err
		}
		crc = flow.ICRC(pkt[:len(pkt)-rocev2.ICRCLen])
		b.ICRC = crc
	}
	rocev2.PutICRC(pkt, crc)
	return nil
}

// decodeBTH is the gopacket decoder of UDP port 4791. It adds the BTH and
// every extended header as layers of their own, in wire order, and hands
// the payload to the decoder roceNextLayer picks.
func decodeBTH(data []byte, p gopacket.PacketBuilder) error {
	b := &BTH{}
	if err := b.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(b)
	op := b.Opcode
	rest := b.Payload
	for _, k := range extKinds {
		if !op.Has(k.hdr) {
			continue
		}
		e := k.new()
		// Parse checked the lengths, so the header cannot be short here.
		if err := e.DecodeFromBytes(rest, p); err != nil {
			return err
		}
		e.setOpcode(op, b.DestQP)
		p.AddLayer(e)
		rest = e.LayerPayload()
	}
	return p.NextDecoder(roceNextLayer(op, b.DestQP, b.pkt.Payload()))
}

// DecodingLayers is a preallocated set of RoCEv2 layers for a
// gopacket.DecodingLayerParser. The extended headers learn the opcode from
// the BTH of the same set, so that each can name the layer that follows it.
// After DecodeLayers, the fields of the layers it reported hold the packet.
type DecodingLayers struct {
	BTH          BTH          // always first
	DETH         DETH         // UD
	FETH         FETH         // FLUSH
	RETH         RETH         // WRITE FIRST/ONLY, READ request, FLUSH, ATOMIC WRITE
	AtomicETH    AtomicETH    // CmpSwap, FetchAdd
	AETH         AETH         // ACK, READ response FIRST/LAST/ONLY, atomic ACK
	AtomicAckETH AtomicAckETH // atomic ACK
	ImmDt        ImmDt        // *_WITH_IMMEDIATE
	IETH         IETH         // SEND *_WITH_INVALIDATE
	CNPPad       CNPPad       // CNP
}

// NewDecodingLayers returns a linked set of RoCEv2 decoding layers.
func NewDecodingLayers() *DecodingLayers {
	d := &DecodingLayers{}
	for _, e := range d.exts() {
		e.linkBTH(&d.BTH)
	}
	return d
}

func (d *DecodingLayers) exts() []extLayer {
	return []extLayer{&d.DETH, &d.FETH, &d.RETH, &d.AtomicETH, &d.AETH, &d.AtomicAckETH, &d.ImmDt, &d.IETH, &d.CNPPad}
}

// Layers returns the set as gopacket.DecodingLayers, BTH first, to pass to
// gopacket.NewDecodingLayerParser or DecodingLayerParser.AddDecodingLayer.
func (d *DecodingLayers) Layers() []gopacket.DecodingLayer {
	out := []gopacket.DecodingLayer{&d.BTH}
	for _, e := range d.exts() {
		out = append(out, e)
	}
	return out
}
