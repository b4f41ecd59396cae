package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/goroce/goroce/smcr"
	"github.com/goroce/goroce/smcr/smcwire"
	"github.com/goroce/goroce/smcr/tcpopt"
)

// What -v prints for each kind of connection.
func TestDescribe(t *testing.T) {
	smc := smcr.ConnInfo{Mode: smcr.ModeSMCRv2, Signalling: smcr.SignalOption, Role: "client",
		LinkGroup: 0x100, FirstContact: true, EID: "GOROCE-DEMO", PeerHost: "vm2", LinkGroupType: "SINGLE",
		Links: []smcr.LinkInfo{{ID: 1, LocalGID: netip.MustParseAddr("127.0.0.2"), PeerGID: netip.MustParseAddr("127.0.0.1"),
			LocalQPN: 0x11, PeerQPN: 0x12, MTU: 1024, State: "ACTIVE", InUse: true}},
		Token: 0xa1, PeerToken: 0xb2, LocalRMBSize: 64 << 10, PeerRMBSize: 16 << 10, SendBufSize: 1 << 20}
	v1 := smc
	v1.Mode, v1.EID, v1.PeerHost, v1.FirstContact, v1.Signalling = smcr.ModeSMCRv1, "", "", false, smcr.SignalConfigured
	v1.LinkGroupType = "ASYMMETRIC_LOCAL"
	v1.Links = append(v1.Links, smcr.LinkInfo{ID: 2, LocalGID: netip.MustParseAddr("127.0.0.2"), PeerGID: netip.MustParseAddr("127.0.0.3"),
		LocalQPN: 0x21, PeerQPN: 0x22, MTU: 4096, State: "ACTIVE", Asymmetric: true})
	tests := []struct {
		name string
		info smcr.ConnInfo
		want []string
	}{
		{"SMC-R v2, first contact", smc, []string{
			"connected: SMC-R v2 (SMC signalled by the TCP option)",
			`  link group 0x00000100, first contact, EID "GOROCE-DEMO", peer host "vm2", SINGLE`,
			"  link 1: GID 127.0.0.2 QPN 0x000011 <-> peer GID 127.0.0.1 QPN 0x000012, MTU 1024, ACTIVE, this connection's",
			"  RMB 64 KiB (peer's 16 KiB), send buffer 1024 KiB, token 0xa1 (peer's 0xb2)",
		}},
		{"SMC-R v1, a group reused", v1, []string{
			"connected: SMC-R v1 (unprivileged: no TCP option, -peer-speaks-smc)",
			"  link group 0x00000100, ASYMMETRIC_LOCAL",
			"  link 1: GID 127.0.0.2 QPN 0x000011 <-> peer GID 127.0.0.1 QPN 0x000012, MTU 1024, ACTIVE, this connection's",
			"  link 2: GID 127.0.0.2 QPN 0x000021 <-> peer GID 127.0.0.3 QPN 0x000022, MTU 4096, ACTIVE, asymmetric",
			"  RMB 64 KiB (peer's 16 KiB), send buffer 1024 KiB, token 0xa1 (peer's 0xb2)",
		}},
		{"no option from the peer", smcr.ConnInfo{Mode: smcr.ModeFallback, Signalling: smcr.SignalOption, Fallback: smcwire.DiagPeerNoSMC, FallbackBy: "local"}, []string{
			"connected: TCP fallback, reason 0x03010000 (peer did not indicate SMC), decided by this side (SMC signalled by the TCP option)",
			"  the peer's handshake carried no SMC option: it does not speak SMC (or is an unprivileged smcat: then pass -peer-speaks-smc on both sides).",
		}},
		{"the peer declined: no UEID", smcr.ConnInfo{Mode: smcr.ModeFallback, Signalling: smcr.SignalOption, Fallback: smcwire.DiagPeerDecl, FallbackBy: "peer", PeerDiagnosis: smcwire.DiagNoUEID}, []string{
			"connected: TCP fallback, reason 0x05000000 (peer declined during handshake), decided by the peer (SMC signalled by the TCP option): the peer declined with 0x03030008 (no UEID)",
			"  no common UEID: give both sides the same one (-ueid NAME here, `smcr ueid add NAME` on Linux).",
		}},
		{"no device", smcr.ConnInfo{Mode: smcr.ModeFallback, Signalling: smcr.SignalConfigured, Fallback: smcwire.DiagNoSMCRDev, FallbackBy: "local"}, []string{
			"connected: TCP fallback, reason 0x03030002 (no SMC-R device), decided by this side (unprivileged: no TCP option, -peer-speaks-smc)",
			"  the goroce device on the local address could not be opened: is another goroce process using that address (UDP port 4791)? Dial from another local address with -s.",
		}},
		// The README's first example as it was: SMC-Rv1 between 127.0.0.2
		// and 127.0.0.1 without a UEID, each a /32.
		{"the peer declined: IP prefix", smcr.ConnInfo{Mode: smcr.ModeFallback, Signalling: smcr.SignalConfigured, Fallback: smcwire.DiagPeerDecl, FallbackBy: "peer", PeerDiagnosis: smcwire.DiagDiffPrefix}, []string{
			"connected: TCP fallback, reason 0x05000000 (peer declined during handshake), decided by the peer (unprivileged: no TCP option, -peer-speaks-smc): the peer declined with 0x03070000 (IP prefix/subnet mismatch)",
			"  SMC-Rv1 needs both devices on one IP subnet, and these are not: offer SMC-Rv2, which does not, with the same -ueid NAME on both sides (`smcr ueid add NAME` on Linux).",
		}},
		{"this side declined: IP prefix", smcr.ConnInfo{Mode: smcr.ModeFallback, Signalling: smcr.SignalConfigured, Fallback: smcwire.DiagDiffPrefix, FallbackBy: "local"}, []string{
			"connected: TCP fallback, reason 0x03070000 (IP prefix/subnet mismatch), decided by this side (unprivileged: no TCP option, -peer-speaks-smc)",
			"  SMC-Rv1 needs both devices on one IP subnet, and these are not: offer SMC-Rv2, which does not, with the same -ueid NAME on both sides (`smcr ueid add NAME` on Linux).",
		}},
		{"the peer has no device", smcr.ConnInfo{Mode: smcr.ModeFallback, Signalling: smcr.SignalOption, Fallback: smcwire.DiagPeerDecl, FallbackBy: "peer", PeerDiagnosis: smcwire.DiagNoSMCRDev}, []string{
			"connected: TCP fallback, reason 0x05000000 (peer declined during handshake), decided by the peer (SMC signalled by the TCP option): the peer declined with 0x03030002 (no SMC-R device)",
			"  the peer has no SMC-R device for this connection's path (on Linux: an RDMA device on the interface, e.g. rdma link add rxe0 type rxe netdev eth0, and a pnet entry or a UEID).",
		}},
		{"an unnamed code", smcr.ConnInfo{Mode: smcr.ModeFallback, Signalling: smcr.SignalConfigured, Fallback: 0x09990099, FallbackBy: "local"}, []string{
			"connected: TCP fallback, reason 0x09990099, decided by this side (unprivileged: no TCP option, -peer-speaks-smc)",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, describeInfo(tt.info, "connected"))
		})
	}
}

// What smcat says when it cannot send the TCP option (as a user, or on a
// system without BPF sock_ops): which flag to use, the chain with -v.
func TestSetupError(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{fmt.Errorf("smcr: ...: %w", tcpopt.ErrNotPermitted), "may not load the sock_ops BPF program"},
		{fmt.Errorf("smcr: ...: %w", tcpopt.ErrUnsupported), "needs Linux 5.10+ with cgroup v2"},
		{errors.New("connection refused"), ""},
	}
	for _, tt := range tests {
		var b bytes.Buffer
		msg := setupError(tt.err, &logger{Prog: "smcat", W: &b, Verbose: true})
		if tt.want == "" {
			assert.Empty(t, msg)
			continue
		}
		assert.Contains(t, msg, tt.want)
		assert.Contains(t, msg, "Run smcat as root, or pass -peer-speaks-smc on both sides")
		assert.Contains(t, b.String(), "detail: smcr: ...: tcpopt:")
	}
}

// What -v prints as a link comes and goes.
func TestDescribeLink(t *testing.T) {
	l := smcr.LinkInfo{ID: 2, LocalGID: netip.MustParseAddr("198.18.0.3"), PeerGID: netip.MustParseAddr("198.18.0.11"),
		LocalQPN: 0x21, PeerQPN: 0x22, MTU: 1024, State: "ACTIVE"}
	assert.Equal(t, []string{
		"link group 0x00000200 (server, SYMMETRIC): link 2 up",
		"  link 2: GID 198.18.0.3 QPN 0x000021 <-> peer GID 198.18.0.11 QPN 0x000022, MTU 1024, ACTIVE",
	}, describeLink(smcr.LinkEvent{LinkGroup: 0x200, Role: "server", LinkGroupType: "SYMMETRIC", Up: true, Link: l}))
	l.State = "INACTIVE"
	assert.Equal(t, []string{
		"link group 0x00000200 (server, SINGLE): link 2 down: the path is gone",
		"  link 2: GID 198.18.0.3 QPN 0x000021 <-> peer GID 198.18.0.11 QPN 0x000022, MTU 1024, INACTIVE",
	}, describeLink(smcr.LinkEvent{LinkGroup: 0x200, Role: "server", LinkGroupType: "SINGLE", Link: l, Err: errors.New("the path is gone")}))
}

// --linger 0 keeps Linux's linger (smcr's own default is short); any
// other is taken as given.
func TestConfigLinger(t *testing.T) {
	for _, tc := range []struct {
		linger, want time.Duration
	}{{0, smcr.LinuxLinkGroupLinger}, {2 * time.Second, 2 * time.Second}} {
		o := options{linger: tc.linger}
		assert.Equal(t, tc.want, config(&o).LinkGroupLinger, tc.linger)
	}
}

// -testlink reaches smcr as given (0 leaves smcr's default, Linux's 30 s).
func TestConfigTestLink(t *testing.T) {
	for _, d := range []time.Duration{0, 2 * time.Second} {
		o := options{testLink: d}
		assert.Equal(t, d, config(&o).TestLinkInterval)
	}
}
