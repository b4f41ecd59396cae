package pcap

import (
	"errors"
	"fmt"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/goroce/goroce/rdmacm/cmwire"
)

// Layer types of management datagrams, numbered 1740-1749 (see
// dispatch.go). A MAD is the payload of a UD SEND_ONLY to QP 1 (see
// roceNextLayer); a CM-class MAD's data decodes as IBCM, and the rdma_cm
// header opening the private data of a REQ or SIDR_REQ to an rdma_cm
// service ID as RDMACM.
const (
	LayerTypeMAD    gopacket.LayerType = 1740
	LayerTypeIBCM   gopacket.LayerType = 1741
	LayerTypeRDMACM gopacket.LayerType = 1742
)

func init() {
	register := func(lt gopacket.LayerType, name string, dec func([]byte, gopacket.PacketBuilder) error) {
		gopacket.RegisterLayerType(int(lt), gopacket.LayerTypeMetadata{Name: name, Decoder: gopacket.DecodeFunc(dec)})
	}
	register(LayerTypeMAD, "MAD", decodeMAD)
	register(LayerTypeIBCM, "IBCM", decodeIBCM)
	register(LayerTypeRDMACM, "RDMACM", decodeRDMACM)
}

// MAD is a management datagram's common header. Its LayerContents are the
// 24 header bytes, its LayerPayload the 232 bytes of class data.
type MAD struct {
	layers.BaseLayer
	cmwire.Header
}

// LayerType returns LayerTypeMAD.
func (m *MAD) LayerType() gopacket.LayerType { return LayerTypeMAD }

// CanDecode returns LayerTypeMAD.
func (m *MAD) CanDecode() gopacket.LayerClass { return LayerTypeMAD }

// NextLayerType returns LayerTypeIBCM for the CM class's messages and
// ClassPortInfo, else gopacket.LayerTypePayload.
func (m *MAD) NextLayerType() gopacket.LayerType {
	if m.Class == cmwire.ClassCM && (m.AttrID.IsCM() || m.AttrID == cmwire.AttrClassPortInfo) {
		return LayerTypeIBCM
	}
	return gopacket.LayerTypePayload
}

// DecodeFromBytes decodes a whole MAD (exactly 256 bytes).
func (m *MAD) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	*m = MAD{}
	mad, err := cmwire.ParseMAD(data)
	if err != nil {
		if err == cmwire.ErrShort {
			df.SetTruncated()
		}
		return err
	}
	m.Header = mad.Header()
	m.BaseLayer = layers.BaseLayer{Contents: data[:cmwire.HeaderLen], Payload: data[cmwire.HeaderLen:cmwire.MADLen]}
	return nil
}

// SerializeTo prepends the header to the class data already in buf (which
// must be 232 bytes: an IBCM layer's or a payload's).
func (m *MAD) SerializeTo(buf gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	if n := len(buf.Bytes()); n != cmwire.DataLen {
		return fmt.Errorf("pcap: MAD: %d bytes of class data, want %d", n, cmwire.DataLen)
	}
	b, err := buf.PrependBytes(cmwire.HeaderLen)
	if err != nil {
		return err
	}
	hdr := make(cmwire.MAD, cmwire.MADLen)
	m.Header.Put(hdr)
	copy(b, hdr[:cmwire.HeaderLen])
	return nil
}

func decodeMAD(data []byte, p gopacket.PacketBuilder) error {
	m := &MAD{}
	if err := m.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(m)
	if m.NextLayerType() == LayerTypeIBCM {
		return p.NextDecoder(&cmDecoder{mad: m})
	}
	return p.NextDecoder(m.NextLayerType())
}

// cmDecoder decodes a CM message knowing the MAD header before it.
type cmDecoder struct{ mad *MAD }

func (d *cmDecoder) Decode(data []byte, p gopacket.PacketBuilder) error {
	c := &IBCM{mad: d.mad}
	if err := c.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(c)
	return p.NextDecoder(c.NextLayerType())
}

// IBCM is a CM message (or the CM class's ClassPortInfo): Msg is one of
// the cmwire values cmwire.Decode returns (REQ, REP, SIDRReq, ...). Its
// LayerContents are the 232 bytes of class data, its LayerPayload the
// message's private data.
type IBCM struct {
	layers.BaseLayer
	// AttrID says which message Msg is.
	AttrID cmwire.AttrID
	// Msg is the decoded message, its byte fields views into the packet.
	Msg any
	// tid and mod are the header's, kept for SerializeTo (Encode needs a
	// whole MAD).
	tid uint64
	mod uint32
	// mad is the header the message belongs to (LinkMAD).
	mad *MAD
}

// LinkMAD tells c which MAD layer's header precedes the data it decodes:
// a CM message's layout depends on the header's attribute. gopacket's
// packet decoding links them itself; a DecodingLayerParser user links the
// IBCM layer of its set to the MAD layer of the same set.
func (c *IBCM) LinkMAD(m *MAD) { c.mad = m }

// LayerType returns LayerTypeIBCM.
func (c *IBCM) LayerType() gopacket.LayerType { return LayerTypeIBCM }

// CanDecode returns LayerTypeIBCM.
func (c *IBCM) CanDecode() gopacket.LayerClass { return LayerTypeIBCM }

// NextLayerType returns LayerTypeRDMACM for a REQ or SIDR_REQ to an
// rdma_cm service ID (port space and port) whose private data opens with
// a header of a known IP version, else gopacket.LayerTypePayload.
func (c *IBCM) NextLayerType() gopacket.LayerType {
	var sid uint64
	switch m := c.Msg.(type) {
	case cmwire.REQ:
		sid = m.ServiceID
	case cmwire.SIDRReq:
		sid = m.ServiceID
	default:
		return gopacket.LayerTypePayload
	}
	if _, _, ok := cmwire.SplitServiceID(sid); !ok {
		return gopacket.LayerTypePayload
	}
	if _, err := cmwire.ParseCMAHeader(c.Payload); err != nil {
		return gopacket.LayerTypePayload
	}
	return LayerTypeRDMACM
}

// DecodeFromBytes decodes the 232 bytes of class data of the linked MAD
// (LinkMAD). The message's byte fields are views into data.
func (c *IBCM) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	mad := c.mad
	*c = IBCM{mad: mad}
	if mad == nil {
		return errors.New("pcap: IBCM: no MAD header linked (LinkMAD)")
	}
	if len(data) != cmwire.DataLen {
		df.SetTruncated()
		return cmwire.ErrShort
	}
	// cmwire reads fields by their offset in the whole MAD: the header is
	// rebuilt in front of the data, which the message's views then point
	// into (a copy: gopacket gives no way back to the header bytes).
	m := make(cmwire.MAD, cmwire.MADLen)
	mad.Header.Put(m)
	copy(m.Data(), data)
	c.AttrID, c.tid, c.mod = mad.AttrID, mad.TID, mad.AttrMod
	c.Msg = cmwire.Decode(m)
	if c.Msg == nil {
		return fmt.Errorf("pcap: IBCM: %v %v is not a CM message", mad.Class, c.AttrID)
	}
	c.BaseLayer = layers.BaseLayer{Contents: data, Payload: privateData(c.Msg)}
	return nil
}

// privateData returns a message's private data (nil for ClassPortInfo).
func privateData(msg any) []byte {
	switch m := msg.(type) {
	case cmwire.REQ:
		return m.PrivateData
	case cmwire.MRA:
		return m.PrivateData
	case cmwire.REJ:
		return m.PrivateData
	case cmwire.REP:
		return m.PrivateData
	case cmwire.RTU:
		return m.PrivateData
	case cmwire.DREQ:
		return m.PrivateData
	case cmwire.DREP:
		return m.PrivateData
	case cmwire.SIDRReq:
		return m.PrivateData
	case cmwire.SIDRRep:
		return m.PrivateData
	case cmwire.LAP:
		return m.PrivateData
	case cmwire.APR:
		return m.PrivateData
	}
	return nil
}

// SerializeTo writes the message's 232 bytes of class data from Msg.
func (c *IBCM) SerializeTo(buf gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	m := cmwire.NewCM(make([]byte, cmwire.MADLen), c.AttrID, c.tid, c.mod)
	var ok bool
	switch v := c.Msg.(type) {
	case cmwire.REQ:
		ok = v.Encode(m)
	case cmwire.MRA:
		ok = v.Encode(m)
	case cmwire.REJ:
		ok = v.Encode(m)
	case cmwire.REP:
		ok = v.Encode(m)
	case cmwire.RTU:
		ok = v.Encode(m)
	case cmwire.DREQ:
		ok = v.Encode(m)
	case cmwire.DREP:
		ok = v.Encode(m)
	case cmwire.SIDRReq:
		ok = v.Encode(m)
	case cmwire.SIDRRep:
		ok = v.Encode(m)
	case cmwire.LAP:
		ok = v.Encode(m)
	case cmwire.APR:
		ok = v.Encode(m)
	case cmwire.ClassPortInfo:
		v.Encode(m)
		ok = true
	default:
		return fmt.Errorf("pcap: IBCM: cannot serialize %T", c.Msg)
	}
	if !ok {
		return fmt.Errorf("pcap: IBCM: %v: private data too long", c.AttrID)
	}
	b, err := buf.PrependBytes(cmwire.DataLen)
	if err != nil {
		return err
	}
	copy(b, m.Data())
	return nil
}

// decodeIBCM is the registered decoder of LayerTypeIBCM, reached without
// a header (gopacket.NewPacket with LayerTypeIBCM first): it cannot know
// the attribute, so the data stays payload.
func decodeIBCM(data []byte, p gopacket.PacketBuilder) error {
	return p.NextDecoder(gopacket.LayerTypePayload)
}

// RDMACM is the rdma_cm header opening a REQ's or SIDR_REQ's private data.
// Its LayerPayload is the rest of the private data: the application's.
type RDMACM struct {
	layers.BaseLayer
	cmwire.CMAHeader
}

// LayerType returns LayerTypeRDMACM.
func (r *RDMACM) LayerType() gopacket.LayerType { return LayerTypeRDMACM }

// CanDecode returns LayerTypeRDMACM.
func (r *RDMACM) CanDecode() gopacket.LayerClass { return LayerTypeRDMACM }

// NextLayerType returns gopacket.LayerTypePayload (the application's
// private data).
func (r *RDMACM) NextLayerType() gopacket.LayerType { return gopacket.LayerTypePayload }

// DecodeFromBytes decodes the header at the start of a private data.
func (r *RDMACM) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	*r = RDMACM{}
	h, err := cmwire.ParseCMAHeader(data)
	if err != nil {
		if err == cmwire.ErrShort {
			df.SetTruncated()
		}
		return err
	}
	r.CMAHeader = h
	r.BaseLayer = layers.BaseLayer{Contents: data[:cmwire.CMAHeaderLen], Payload: data[cmwire.CMAHeaderLen:]}
	return nil
}

// SerializeTo prepends the header.
func (r *RDMACM) SerializeTo(buf gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	b, err := buf.PrependBytes(cmwire.CMAHeaderLen)
	if err != nil {
		return err
	}
	r.CMAHeader.Put(b)
	return nil
}

func decodeRDMACM(data []byte, p gopacket.PacketBuilder) error {
	r := &RDMACM{}
	if err := r.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(r)
	return p.NextDecoder(r.NextLayerType())
}
