//go:build linux

package main

// The mode of one SMC socket, from smc_diag (sock_diag for AF_SMC): SMC-R,
// SMC-D, or fallback to TCP with the reason, matched by socket inode.

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"
)

const (
	sockDiagByFamily = 20 // SOCK_DIAG_BY_FAMILY
	smcDiagReqLen    = 4 + 48
	smcDiagMsgLen    = 64 // family, state, mode, shutdown, inet_diag_sockid (48), uid, pad, inode
	smcDiagFallback  = 5  // SMC_DIAG_FALLBACK: reason u32, peer diagnosis u32
)

// smcMode is what smc_diag says about a socket.
type smcMode struct {
	mode     uint8 // 0 SMC-R, 1 fallback TCP, 2 SMC-D
	reason   uint32
	peerDiag uint32
	found    bool
}

func (m smcMode) String() string {
	switch {
	case !m.found:
		return "mode=unknown"
	case m.mode == 0:
		return "mode=smcr"
	case m.mode == 2:
		return "mode=smcd"
	case m.mode == 1:
		s := fmt.Sprintf("mode=fallback reason=0x%08x (%s)", m.reason, declineName(m.reason))
		if m.peerDiag != 0 {
			s += fmt.Sprintf(" peer=0x%08x", m.peerDiag)
		}
		return s
	}
	return fmt.Sprintf("mode=%d", m.mode)
}

// socketMode looks the socket with the inode up in smc_diag's dump.
func socketMode(ino uint64) (smcMode, error) {
	c, err := dialNetlink(unix.NETLINK_SOCK_DIAG, nlTimeout)
	if err != nil {
		return smcMode{}, err
	}
	defer c.Close()
	req := make([]byte, smcDiagReqLen)
	req[0] = afSMC
	msgs, err := c.dump(sockDiagByFamily, req)
	if err != nil {
		return smcMode{}, fmt.Errorf("smc_diag: %w (is the smc_diag module loaded?)", err)
	}
	for _, m := range msgs {
		sm, ino2, err := parseDiagMsg(m.data)
		if err != nil {
			return smcMode{}, err
		}
		if ino2 == ino {
			return sm, nil
		}
	}
	return smcMode{}, nil
}

// parseDiagMsg reads one smc_diag_msg and its attributes.
func parseDiagMsg(b []byte) (smcMode, uint64, error) {
	if len(b) < smcDiagMsgLen {
		return smcMode{}, 0, fmt.Errorf("smc_diag message: %w", errTruncated)
	}
	m := smcMode{mode: b[2], found: true}
	ino := binary.NativeEndian.Uint64(b[56:64])
	attrs, err := parseAttrs(b[smcDiagMsgLen:])
	if err != nil {
		return m, ino, fmt.Errorf("smc_diag attributes: %w", err)
	}
	for _, a := range attrs {
		if a.typ == smcDiagFallback && len(a.data) >= 8 {
			m.reason = binary.NativeEndian.Uint32(a.data[0:])
			m.peerDiag = binary.NativeEndian.Uint32(a.data[4:])
		}
	}
	return m, ino, nil
}
