package smcr

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/goroce/goroce/smcr/smcwire"
)

// A v1 Proposal's IP area is the subnet of the interface address that
// covers the device's address, as Linux's: an address on no interface of
// its own (127.0.0.2, beside lo's 127.0.0.1/8) is in that interface's
// subnet, not a /32 that no server shares.
func TestIPAreaOf(t *testing.T) {
	p := netip.MustParsePrefix
	ifs := []netip.Prefix{p("127.0.0.1/8"), p("198.18.0.1/24"), p("198.18.0.9/16"), p("fd00::1/64"), p("10.0.0.5/32")}
	v4 := func(subnet string, bits uint8) *smcwire.IPArea {
		return &smcwire.IPArea{Subnet: netip.MustParseAddr(subnet), PrefixLen: bits}
	}
	v6 := func(prefix string, bits uint8) *smcwire.IPArea {
		return &smcwire.IPArea{Subnet: netip.IPv4Unspecified(), IPv6Prefixes: []smcwire.IPv6Prefix{{Addr: netip.MustParseAddr(prefix), Len: bits}}}
	}
	for _, tc := range []struct {
		addr string
		want *smcwire.IPArea
	}{
		{"127.0.0.1", v4("127.0.0.0", 8)},
		{"127.0.0.2", v4("127.0.0.0", 8)},
		{"127.64.3.2", v4("127.0.0.0", 8)},
		{"198.18.0.77", v4("198.18.0.0", 24)},   // the longest prefix that covers it
		{"198.18.0.9", v4("198.18.0.0", 16)},    // its own address wins over a longer cover
		{"198.18.5.5", v4("198.18.0.0", 16)},    // only the /16 covers it
		{"10.0.0.6", v4("10.0.0.6", 32)},        // on no interface, covered by none
		{"fd00::42", v6("fd00::", 64)},          // IPv6: the prefix list
		{"2001:db8::1", v6("2001:db8::1", 128)}, // covered by none
	} {
		assert.Equal(t, tc.want, ipAreaOf(netip.MustParseAddr(tc.addr), ifs), tc.addr)
	}
}
