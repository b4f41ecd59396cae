package pcap

import (
	"fmt"
	"strings"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/goroce/goroce/smcr/smcwire"
)

// Layer types of SMC, numbered 1720-1739 (see dispatch.go). LLC and CDC
// messages are decoded from the payload of RC SEND_ONLY packets (see
// roceNextLayer). CLC runs over a TCP connection on any port, which
// gopacket's TCP layer cannot dispatch on, so CLC is decoded on request:
// SMCLayers and DecodeCLC.
const (
	LayerTypeSMCCLC gopacket.LayerType = 1720
	LayerTypeSMCLLC gopacket.LayerType = 1721
	LayerTypeSMCCDC gopacket.LayerType = 1722
)

func init() {
	register := func(lt gopacket.LayerType, name string, dec func([]byte, gopacket.PacketBuilder) error) {
		gopacket.RegisterLayerType(int(lt), gopacket.LayerTypeMetadata{Name: name, Decoder: gopacket.DecodeFunc(dec)})
	}
	register(LayerTypeSMCCLC, "SMCCLC", decodeSMCCLC)
	register(LayerTypeSMCLLC, "SMCLLC", decodeSMCLLC)
	register(LayerTypeSMCCDC, "SMCCDC", decodeSMCCDC)
}

// smcDecodeError marks short input as truncated for gopacket.
func smcDecodeError(err error, df gopacket.DecodeFeedback) error {
	if err == smcwire.ErrShort {
		df.SetTruncated()
	}
	return err
}

// SMCCLC is one CLC message (Proposal, Accept, Confirm or Decline) from a
// TCP payload. Its LayerContents are the message; its LayerPayload is the
// rest of the segment, which NextLayerType decodes as another CLC message
// when it starts with an eyecatcher.
type SMCCLC struct {
	layers.BaseLayer
	// Type is the CLC message type.
	Type smcwire.CLCType
	// Length is the 'length' field: the whole message.
	Length int
	// Header holds the eyecatcher kind, version, SMC variants and the
	// first-contact (Decline: out-of-sync) flag.
	Header smcwire.CLCHeader
	// Exactly one of these is set, by Type. An SMC-D Accept/Confirm, which
	// smcwire does not decode, has none.
	Proposal      *smcwire.ProposalFields
	AcceptConfirm *smcwire.AcceptConfirmFields
	Decline       *smcwire.DeclineFields
	// Msg is the smcwire view of the message (a view into the packet).
	Msg smcwire.CLC
}

// LayerType returns LayerTypeSMCCLC.
func (c *SMCCLC) LayerType() gopacket.LayerType { return LayerTypeSMCCLC }

// CanDecode returns LayerTypeSMCCLC.
func (c *SMCCLC) CanDecode() gopacket.LayerClass { return LayerTypeSMCCLC }

// NextLayerType returns LayerTypeSMCCLC when another CLC message follows in
// the segment, else gopacket.LayerTypePayload for leftover bytes.
func (c *SMCCLC) NextLayerType() gopacket.LayerType {
	switch {
	case len(c.Payload) == 0:
		return gopacket.LayerTypeZero
	case smcwire.IsCLC(c.Payload):
		return LayerTypeSMCCLC
	}
	return gopacket.LayerTypePayload
}

// DecodeFromBytes decodes the CLC message at the start of data with the
// smcwire parser of its type.
func (c *SMCCLC) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	*c = SMCCLC{}
	msg, err := smcwire.ParseCLC(data)
	if err != nil {
		return smcDecodeError(err, df)
	}
	c.Type, c.Length, c.Header, c.Msg = msg.Type(), msg.Length(), msg.Header(), msg
	switch msg.Type() {
	case smcwire.CLCProposal:
		p, err := smcwire.ParseProposal(msg)
		if err != nil {
			return err
		}
		f := p.Fields()
		c.Proposal = &f
	case smcwire.CLCAccept, smcwire.CLCConfirm:
		a, err := smcwire.ParseAcceptConfirm(msg)
		switch {
		case err == smcwire.ErrUnsupported: // SMC-D: header only
		case err != nil:
			return err
		default:
			f := a.Fields()
			c.AcceptConfirm = &f
		}
	case smcwire.CLCDecline:
		d, err := smcwire.ParseDecline(msg)
		if err != nil {
			return err
		}
		f := d.Fields()
		c.Decline = &f
	default:
		return smcwire.ErrType
	}
	c.BaseLayer = layers.BaseLayer{Contents: data[:len(msg)], Payload: data[len(msg):]}
	return nil
}

// SerializeTo writes the message from its decoded fields (Proposal,
// AcceptConfirm or Decline) with the smcwire builders.
func (c *SMCCLC) SerializeTo(buf gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	var b []byte
	switch {
	case c.Proposal != nil:
		b = smcwire.AppendProposal(nil, c.Proposal)
	case c.AcceptConfirm != nil:
		b = smcwire.AppendAcceptConfirm(nil, c.AcceptConfirm)
	case c.Decline != nil:
		b = smcwire.AppendDecline(nil, c.Decline)
	default:
		return fmt.Errorf("pcap: SMCCLC %v has no fields to serialize", c.Type)
	}
	return prependSMC(buf, b)
}

// Name returns the message name, e.g. "Accept v2 first contact".
func (c *SMCCLC) Name() string { return c.Msg.Name() }

func decodeSMCCLC(data []byte, p gopacket.PacketBuilder) error {
	c := &SMCCLC{}
	if err := c.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(c)
	return p.NextDecoder(c.NextLayerType())
}

// SMCLLC is one LLC message from the payload of an RC SEND.
type SMCLLC struct {
	layers.BaseLayer
	// LLCFields holds the type, the flags and the type's fields.
	smcwire.LLCFields
	// Length is the message length (for v2 the 16-bit length field as
	// decoded, see smcwire.LLC).
	Length int
	// Msg is the smcwire view of the message (a view into the packet).
	Msg smcwire.LLC
}

// LayerType returns LayerTypeSMCLLC.
func (l *SMCLLC) LayerType() gopacket.LayerType { return LayerTypeSMCLLC }

// CanDecode returns LayerTypeSMCLLC.
func (l *SMCLLC) CanDecode() gopacket.LayerClass { return LayerTypeSMCLLC }

// NextLayerType returns gopacket.LayerTypePayload for bytes after the
// message (none in an exact SEND), else gopacket.LayerTypeZero.
func (l *SMCLLC) NextLayerType() gopacket.LayerType { return restType(l.Payload) }

// DecodeFromBytes decodes an LLC message with smcwire.ParseLLC.
func (l *SMCLLC) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	*l = SMCLLC{}
	m, err := smcwire.ParseLLC(data)
	if err != nil {
		return smcDecodeError(err, df)
	}
	l.LLCFields, l.Length, l.Msg = m.Fields(), m.Length(), m
	l.BaseLayer = layers.BaseLayer{Contents: data[:len(m)], Payload: data[len(m):]}
	return nil
}

// SerializeTo writes the message from LLCFields with smcwire.AppendLLC.
func (l *SMCLLC) SerializeTo(buf gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	b := smcwire.AppendLLC(nil, &l.LLCFields)
	if len(b) == 0 {
		return fmt.Errorf("pcap: SMCLLC: invalid LLC type %#02x", uint8(l.Type))
	}
	return prependSMC(buf, b)
}

// Name returns the message name, e.g. "ADD_LINK_v2 RESP".
func (l *SMCLLC) Name() string { return l.Msg.Name() }

func decodeSMCLLC(data []byte, p gopacket.PacketBuilder) error {
	l := &SMCLLC{}
	if err := l.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(l)
	return p.NextDecoder(l.NextLayerType())
}

// SMCCDC is one CDC message from the payload of an RC SEND.
type SMCCDC struct {
	layers.BaseLayer
	// CDCFields holds sequence number, alert token, cursors and flags.
	smcwire.CDCFields
	// Msg is the smcwire view of the message (a view into the packet).
	Msg smcwire.CDC
}

// LayerType returns LayerTypeSMCCDC.
func (c *SMCCDC) LayerType() gopacket.LayerType { return LayerTypeSMCCDC }

// CanDecode returns LayerTypeSMCCDC.
func (c *SMCCDC) CanDecode() gopacket.LayerClass { return LayerTypeSMCCDC }

// NextLayerType returns gopacket.LayerTypePayload for bytes after the
// message, else gopacket.LayerTypeZero.
func (c *SMCCDC) NextLayerType() gopacket.LayerType { return restType(c.Payload) }

// DecodeFromBytes decodes a CDC message with smcwire.ParseCDC.
func (c *SMCCDC) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	*c = SMCCDC{}
	m, err := smcwire.ParseCDC(data)
	if err != nil {
		return smcDecodeError(err, df)
	}
	c.CDCFields, c.Msg = m.Fields(), m
	c.BaseLayer = layers.BaseLayer{Contents: data[:len(m)], Payload: data[len(m):]}
	return nil
}

// SerializeTo writes the message from CDCFields with smcwire.AppendCDC.
func (c *SMCCDC) SerializeTo(buf gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	return prependSMC(buf, smcwire.AppendCDC(nil, &c.CDCFields))
}

func decodeSMCCDC(data []byte, p gopacket.PacketBuilder) error {
	c := &SMCCDC{}
	if err := c.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(c)
	return p.NextDecoder(c.NextLayerType())
}

func restType(rest []byte) gopacket.LayerType {
	if len(rest) == 0 {
		return gopacket.LayerTypeZero
	}
	return gopacket.LayerTypePayload
}

func prependSMC(buf gopacket.SerializeBuffer, b []byte) error {
	out, err := buf.PrependBytes(len(b))
	if err != nil {
		return err
	}
	copy(out, b)
	return nil
}

// DecodeCLC decodes the CLC messages of a TCP payload, one after another
// as long as the next starts with an eyecatcher. It returns the messages
// decoded before the first error. A payload that does not start with an
// eyecatcher gives no messages and no error.
func DecodeCLC(tcpPayload []byte) ([]*SMCCLC, error) {
	var out []*SMCCLC
	for smcwire.IsCLC(tcpPayload) {
		c := &SMCCLC{}
		if err := c.DecodeFromBytes(tcpPayload, gopacket.NilDecodeFeedback); err != nil {
			return out, err
		}
		out = append(out, c)
		tcpPayload = c.Payload
	}
	return out, nil
}

// SMCLayers returns the SMC messages of a packet in order: the SMCLLC and
// SMCCDC layers gopacket decoded below the BTH, and CLC messages decoded
// from the payload of a TCP layer (CLC messages that do not decode are
// left out; use DecodeCLC to see the error).
func SMCLayers(p gopacket.Packet) []gopacket.Layer {
	var out []gopacket.Layer
	for _, l := range p.Layers() {
		switch l.LayerType() {
		case LayerTypeSMCLLC, LayerTypeSMCCDC, LayerTypeSMCCLC:
			out = append(out, l)
		}
	}
	if tcp, ok := p.Layer(layers.LayerTypeTCP).(*layers.TCP); ok && len(out) == 0 {
		clcs, _ := DecodeCLC(tcp.Payload)
		for _, c := range clcs {
			out = append(out, c)
		}
	}
	return out
}

// HasSMCOption reports whether a TCP segment carries the SMC option
// (kind 254, magic E2D4C3D9), as an AF_SMC client's SYN and an SMC
// server's SYN-ACK do.
func HasSMCOption(tcp *layers.TCP) bool {
	for _, o := range tcp.Options {
		if smcwire.IsSMCOption(byte(o.OptionType), o.OptionData) {
			return true
		}
	}
	return false
}

// SMCSummary returns a one-line description of an SMC layer in the style
// of tcpdump, e.g. "CLC Accept v2 first contact len 160 qpn 0x11 rkey
// 0x3d7 ...", "LLC DELETE_LINK_v2 len 44 all reason OP_INIT_TERM" or "CDC
// seq 1 token 1 prod 0:100 cons 0:0"; "" for other layers.
func SMCSummary(l gopacket.Layer) string {
	var sb strings.Builder
	switch m := l.(type) {
	case *SMCCLC:
		clcSummary(&sb, m)
	case *SMCLLC:
		llcSummary(&sb, m)
	case *SMCCDC:
		cdcSummary(&sb, m)
	}
	return sb.String()
}
