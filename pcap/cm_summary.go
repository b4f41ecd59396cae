package pcap

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/google/gopacket"

	"github.com/goroce/goroce/rdmacm/cmwire"
	"github.com/goroce/goroce/rocev2"
)

// CMLayers returns the MAD, IBCM and RDMACM layers of a packet (nil for
// those it does not have).
func CMLayers(p gopacket.Packet) (*MAD, *IBCM, *RDMACM) {
	mad, _ := p.Layer(LayerTypeMAD).(*MAD)
	cm, _ := p.Layer(LayerTypeIBCM).(*IBCM)
	hdr, _ := p.Layer(LayerTypeRDMACM).(*RDMACM)
	return mad, cm, hdr
}

// MADSummary returns a one-line description of the MAD a packet carries,
// e.g. "CM REQ comm 0xa3a187cc sid 0x1061c06 (TCP 7174) qpn 0x1a psn
// 0x4b8d0f mtu 1024 ... rdma_cm 198.18.0.12:43344 > 198.18.0.11", "CM REJ
// comm 0 remote 0x12 reason 8 (invalid service ID) to REQ" or "MAD Perf
// GetResp attr 0x0012 tid 0x1 status 0x000c"; "" when it carries none.
func MADSummary(p gopacket.Packet) string {
	mad, cm, hdr := CMLayers(p)
	if mad == nil {
		return ""
	}
	var sb strings.Builder
	if cm == nil || cm.AttrID == cmwire.AttrClassPortInfo {
		fmt.Fprintf(&sb, "MAD %v %v attr %#04x tid %#x", mad.Class, mad.Method, uint16(mad.AttrID), mad.TID)
		if mad.Status != 0 {
			fmt.Fprintf(&sb, " status %#04x", uint16(mad.Status))
		}
		if cpi, ok := cm.msg().(cmwire.ClassPortInfo); ok {
			fmt.Fprintf(&sb, " ClassPortInfo version %d cap %#x resp time %d", cpi.ClassVersion, cpi.CapabilityMask, cpi.RespTimeValue)
		}
		return sb.String()
	}
	fmt.Fprintf(&sb, "CM %v", cm.AttrID)
	if mad.Method != cmwire.MethodSend || mad.ClassVersion != cmwire.CMClassVersion {
		fmt.Fprintf(&sb, " (%v, class version %d)", mad.Method, mad.ClassVersion)
	}
	cmSummary(&sb, cm.Msg)
	if hdr != nil {
		fmt.Fprintf(&sb, " rdma_cm %s > %s", netip.AddrPortFrom(hdr.Src, hdr.Port), hdr.Dst)
		if hdr.Version != cmwire.CMAVersion {
			fmt.Fprintf(&sb, " version %d", hdr.Version)
		}
	}
	return sb.String()
}

func (c *IBCM) msg() any {
	if c == nil {
		return nil
	}
	return c.Msg
}

func serviceID(sid uint64) string {
	if ps, port, ok := cmwire.SplitServiceID(sid); ok {
		return fmt.Sprintf("%#x (%v %d)", sid, ps, port)
	}
	return fmt.Sprintf("%#x", sid)
}

func cmSummary(sb *strings.Builder, msg any) {
	switch m := msg.(type) {
	case cmwire.REQ:
		fmt.Fprintf(sb, " comm %#x sid %s qpn %#x psn %#x mtu %d rr %d id %d retry %d rnr %d timeout %d/%d retries %d",
			m.LocalCommID, serviceID(m.ServiceID), m.LocalQPN, m.StartingPSN, rocev2.MTU(m.PathMTU).Bytes(),
			m.ResponderResources, m.InitiatorDepth, m.RetryCount, m.RNRRetryCount, m.LocalCMResponseTimeout,
			m.RemoteCMResponseTimeout, m.MaxCMRetries)
		if m.TransportType != cmwire.TransportRC {
			fmt.Fprintf(sb, " transport %d", m.TransportType)
		}
		if m.SRQ {
			sb.WriteString(" srq")
		}
		fmt.Fprintf(sb, " path %s > %s fl %#x hop %d ack %d", m.Primary.LocalGID, m.Primary.RemoteGID,
			m.Primary.FlowLabel, m.Primary.HopLimit, m.Primary.LocalACKTimeout)
	case cmwire.REP:
		fmt.Fprintf(sb, " comm %#x remote %#x qpn %#x psn %#x rr %d id %d ack delay %d rnr %d",
			m.LocalCommID, m.RemoteCommID, m.LocalQPN, m.StartingPSN, m.ResponderResources, m.InitiatorDepth,
			m.TargetACKDelay, m.RNRRetryCount)
		if m.SRQ {
			sb.WriteString(" srq")
		}
	case cmwire.REJ:
		fmt.Fprintf(sb, " comm %#x remote %#x reason %d (%v) to %v", m.LocalCommID, m.RemoteCommID,
			uint16(m.Reason), m.Reason, m.MessageRejected)
		if m.ARILength > 0 {
			fmt.Fprintf(sb, " ari %x", m.ARIBytes())
		}
	case cmwire.MRA:
		fmt.Fprintf(sb, " comm %#x remote %#x for %v timeout %d", m.LocalCommID, m.RemoteCommID, m.MessageMRAed, m.ServiceTimeout)
	case cmwire.RTU:
		fmt.Fprintf(sb, " comm %#x remote %#x", m.LocalCommID, m.RemoteCommID)
	case cmwire.DREQ:
		fmt.Fprintf(sb, " comm %#x remote %#x qpn %#x", m.LocalCommID, m.RemoteCommID, m.RemoteQPNEECN)
	case cmwire.DREP:
		fmt.Fprintf(sb, " comm %#x remote %#x", m.LocalCommID, m.RemoteCommID)
	case cmwire.SIDRReq:
		fmt.Fprintf(sb, " req %#x sid %s pkey %#04x", m.RequestID, serviceID(m.ServiceID), m.PKey)
	case cmwire.SIDRRep:
		fmt.Fprintf(sb, " req %#x status %d (%v) qpn %#x qkey %#x sid %s", m.RequestID, uint8(m.Status), m.Status,
			m.QPN, m.QKey, serviceID(m.ServiceID))
	case cmwire.LAP:
		fmt.Fprintf(sb, " comm %#x remote %#x qpn %#x", m.LocalCommID, m.RemoteCommID, m.RemoteQPNEECN)
	case cmwire.APR:
		fmt.Fprintf(sb, " comm %#x remote %#x status %d", m.LocalCommID, m.RemoteCommID, m.Status)
	}
}
