package backendflag

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCheckRx(t *testing.T) {
	for _, tc := range []struct {
		spec Spec
		err  string // "" for none
	}{
		{Spec{Kind: AFPacket, Iface: "eth0"}, ""},
		{Spec{Kind: AFPacket, Iface: "eth0", Rx: "mmsg"}, ""},
		{Spec{Kind: AFPacket, Iface: "eth0", Rx: "ring"}, ""},
		{Spec{Kind: AFPacket, Iface: "eth0", Rx: "tpacket"}, "-rx \"tpacket\": use mmsg"},
		{Spec{Kind: UDP, Rx: "ring"}, "receive mode of -backend afpacket"},
		{Spec{Kind: UDP, Rx: "mmsg"}, ""},
	} {
		err := tc.spec.Check()
		if tc.err == "" {
			assert.NoError(t, err, "%+v", tc.spec)
		} else {
			assert.ErrorContains(t, err, tc.err, "%+v", tc.spec)
		}
	}
}
