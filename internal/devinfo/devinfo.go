// Package devinfo prints a goroce device the way the rdma-core and OFED tools
// print a kernel RDMA device, so that the output can be read (and parsed) by
// people and scripts used to them:
//
//   - WriteDevinfo: ibv_devinfo [-v] (libibverbs/examples/devinfo.c),
//   - WriteGIDs: the show_gids script (DEV PORT INDEX GID IPv4 VER DEV),
//   - WriteCounters: rdma statistic's hardware counters, one "name value"
//     line each.
//
// It is shared by cmd/roce-devinfo and cmd/rc_pingpong -stats.
package devinfo

import (
	"fmt"
	"io"

	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/device"
)

// Values that ibv_devinfo prints but a goroce device does not model. They are
// what rxe reports, so that a goroce device reads like an rxe one.
const (
	transportIB     = 0          // IBV_TRANSPORT_IB: rxe, like every RoCE device, says InfiniBand
	pageSizeCap     = 0xfffff000 // rxe's RXE_PAGE_SIZE_CAP
	portCapFlags    = 0x00010000 // IB_PORT_CM_SUP, rxe's RXE_PORT_PORT_CAP_FLAGS
	maxVLNum        = 1          // rxe's RXE_PORT_MAX_VL_NUM: 1 VL
	activeWidth1X   = 1          // 1X (rxe's default when the netdev speed is unknown)
	activeSpeedSDR  = 1          // 2.5 Gbps
	physStateLinkUp = 5          // LINK_UP
)

// GUIDString formats a GUID as ibv_devinfo does: four groups of four hex
// digits, e.g. 5054:00ff:fe96:b707.
func GUIDString(guid uint64) string {
	return fmt.Sprintf("%04x:%04x:%04x:%04x", guid>>48&0xffff, guid>>32&0xffff, guid>>16&0xffff, guid&0xffff)
}

// mtuString is devinfo.c's mtu_str.
func mtuString(m rocev2.MTU) string {
	if !m.Valid() {
		return "invalid MTU"
	}
	return m.String()
}

// atomicCap maps DeviceAttr.AtomicCap to ibv_atomic_cap's number.
func atomicCap(s string) int {
	switch s {
	case "ATOMIC_HCA":
		return 1
	case "ATOMIC_GLOB":
		return 2
	}
	return 0
}

// WriteDevinfo prints d in the layout of ibv_devinfo, or ibv_devinfo -v when
// verbose: the device block, then the port block with, verbosely, the
// port's limits and its GID table ("GID[  1]:\t\t::ffff:127.0.0.1, RoCE v2").
func WriteDevinfo(w io.Writer, d *device.Device, verbose bool) error {
	p := &printer{w: w}
	a := d.Attr()
	p.f("hca_id:\t%s\n", d.Name())
	p.f("\ttransport:\t\t\t%s (%d)\n", "InfiniBand", transportIB)
	if a.FWVer != "" {
		p.f("\tfw_ver:\t\t\t\t%s\n", a.FWVer)
	}
	p.f("\tnode_guid:\t\t\t%s\n", GUIDString(a.NodeGUID))
	p.f("\tsys_image_guid:\t\t\t%s\n", GUIDString(a.SysImageGUID))
	p.f("\tvendor_id:\t\t\t0x%04x\n", a.VendorID)
	p.f("\tvendor_part_id:\t\t\t%d\n", a.VendorPartID)
	p.f("\thw_ver:\t\t\t\t0x%X\n", a.HWVer)
	p.f("\tphys_port_cnt:\t\t\t%d\n", a.PhysPortCnt)
	if verbose {
		writeDeviceLimits(p, a)
	}
	writePort(p, d, verbose)
	return p.err
}

// writeDeviceLimits is the -v part of the device block, in devinfo.c's order.
// Objects goroce does not have (EE contexts, RDDs, MWs, raw QPs, multicast,
// AHs, FMRs) print as 0, as they would on a device without them.
func writeDeviceLimits(p *printer, a device.DeviceAttr) {
	p.f("\tmax_mr_size:\t\t\t0x%x\n", a.MaxMRSize)
	p.f("\tpage_size_cap:\t\t\t0x%x\n", pageSizeCap)
	p.f("\tmax_qp:\t\t\t\t%d\n", a.MaxQP)
	p.f("\tmax_qp_wr:\t\t\t%d\n", a.MaxQPWR)
	p.f("\tdevice_cap_flags:\t\t0x%08x\n", 0)
	p.f("\tmax_sge:\t\t\t%d\n", a.MaxSGE)
	p.f("\tmax_sge_rd:\t\t\t%d\n", a.MaxSGE)
	p.f("\tmax_cq:\t\t\t\t%d\n", a.MaxCQ)
	p.f("\tmax_cqe:\t\t\t%d\n", a.MaxCQE)
	p.f("\tmax_mr:\t\t\t\t%d\n", a.MaxMR)
	p.f("\tmax_pd:\t\t\t\t%d\n", a.MaxPD)
	p.f("\tmax_qp_rd_atom:\t\t\t%d\n", a.MaxQPRdAtom)
	p.f("\tmax_ee_rd_atom:\t\t\t%d\n", 0)
	p.f("\tmax_res_rd_atom:\t\t%d\n", a.MaxResRdAtom)
	p.f("\tmax_qp_init_rd_atom:\t\t%d\n", a.MaxQPInitRdAtom)
	p.f("\tmax_ee_init_rd_atom:\t\t%d\n", 0)
	p.f("\tatomic_cap:\t\t\t%s (%d)\n", a.AtomicCap, atomicCap(a.AtomicCap))
	for _, name := range []string{"max_ee:\t\t\t\t", "max_rdd:\t\t\t", "max_mw:\t\t\t\t",
		"max_raw_ipv6_qp:\t\t", "max_raw_ethy_qp:\t\t", "max_mcast_grp:\t\t\t",
		"max_mcast_qp_attach:\t\t", "max_total_mcast_qp_attach:\t", "max_ah:\t\t\t\t",
		"max_fmr:\t\t\t"} {
		p.f("\t%s%d\n", name, 0)
	}
	p.f("\tmax_srq:\t\t\t%d\n", a.MaxSRQ)
	if a.MaxSRQ > 0 { // devinfo.c prints these only for a device with SRQs
		p.f("\tmax_srq_wr:\t\t\t%d\n", a.MaxSRQWR)
		p.f("\tmax_srq_sge:\t\t\t%d\n", a.MaxSRQSGE)
	}
	p.f("\tmax_pkeys:\t\t\t%d\n", a.MaxPKeys)
	p.f("\tlocal_ca_ack_delay:\t\t%d\n", a.LocalCAAckDelay)
	p.f("\tgeneral_odp_caps:\n")
	for _, tr := range []string{"rc", "uc", "ud", "xrc"} {
		p.f("\t%s_odp_caps:\n\t\t\t\t\tNO SUPPORT\n", tr)
	}
	p.f("\tcompletion_timestamp_mask not supported\n")
	p.f("\tcore clock not supported\n")
	p.f("\tnum_comp_vectors:\t\t%d\n", a.NumCompVectors)
}

// writePort prints the block of port 1, the device's only port.
func writePort(p *printer, d *device.Device, verbose bool) {
	pa := d.Port()
	p.f("\t\tport:\t%d\n", 1)
	p.f("\t\t\tstate:\t\t\t%s (%d)\n", pa.State, pa.State)
	p.f("\t\t\tmax_mtu:\t\t%s (%d)\n", mtuString(pa.MaxMTU), pa.MaxMTU)
	p.f("\t\t\tactive_mtu:\t\t%s (%d)\n", mtuString(pa.ActiveMTU), pa.ActiveMTU)
	p.f("\t\t\tsm_lid:\t\t\t%d\n", 0)
	p.f("\t\t\tport_lid:\t\t%d\n", 0) // RoCE has no LIDs
	p.f("\t\t\tport_lmc:\t\t0x%02x\n", 0)
	p.f("\t\t\tlink_layer:\t\t%s\n", pa.LinkLayer)
	if verbose {
		p.f("\t\t\tmax_msg_sz:\t\t0x%x\n", pa.MaxMsgSize)
		p.f("\t\t\tport_cap_flags:\t\t0x%08x\n", portCapFlags)
		p.f("\t\t\tport_cap_flags2:\t0x%04x\n", 0)
		p.f("\t\t\tmax_vl_num:\t\t%d (%d)\n", maxVLNum, maxVLNum)
		p.f("\t\t\tbad_pkey_cntr:\t\t0x%x\n", d.Counters.RcvdPKeyErr.Load())
		p.f("\t\t\tqkey_viol_cntr:\t\t0x%x\n", 0)
		p.f("\t\t\tsm_sl:\t\t\t%d\n", 0)
		p.f("\t\t\tpkey_tbl_len:\t\t%d\n", pa.PKeyTableLen)
		p.f("\t\t\tgid_tbl_len:\t\t%d\n", pa.GIDTableLen)
		p.f("\t\t\tsubnet_timeout:\t\t%d\n", 0)
		p.f("\t\t\tinit_type_reply:\t%d\n", 0)
		p.f("\t\t\tactive_width:\t\t1X (%d)\n", activeWidth1X)
		p.f("\t\t\tactive_speed:\t\t2.5 Gbps (%d)\n", activeSpeedSDR)
		p.f("\t\t\tphys_state:\t\tLINK_UP (%d)\n", physStateLinkUp)
		for _, g := range d.GIDs() {
			if !nullGID(g.GID) {
				p.f("\t\t\tGID[%3d]:\t\t%s, %s\n", g.Index, g.GID, g.Type)
			}
		}
	}
	p.f("\n")
}

// nullGID is devinfo.c's null_gid: an entry whose interface ID is zero is
// unused and not printed.
func nullGID(g device.GID) bool {
	for _, b := range g[8:] {
		if b != 0 {
			return false
		}
	}
	return true
}

// printer is an io.Writer that remembers its first error, so that the
// layouts above read as a list of lines.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) f(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}
