package tcpopt

import (
	"errors"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/stretchr/testify/require"
)

// TestSockOpsOffsets checks the bpf_sock_ops offsets the program uses
// against the running kernel's BTF. They are uapi and cannot move; this
// catches a typo, not the kernel.
func TestSockOpsOffsets(t *testing.T) {
	spec, err := btf.LoadKernelSpec()
	if errors.Is(err, ebpf.ErrNotSupported) {
		t.Skipf("the kernel has no BTF: %v", err)
	}
	require.NoError(t, err)
	var st *btf.Struct
	require.NoError(t, spec.TypeByName("bpf_sock_ops", &st))
	require.EqualValues(t, sockOpsSize, st.Size)
	for name, want := range map[string]int{
		"op":                    offOp,
		"args":                  offArgs,
		"local_port":            offLocalPort,
		"bpf_sock_ops_cb_flags": offCbFlags,
		"skb_tcp_flags":         offSkbTCPFlags,
	} {
		off, size, ok := member(st.Members, name, 0)
		require.True(t, ok, "bpf_sock_ops has no %s", name)
		require.Equal(t, want, off, "offset of %s", name)
		if name != "args" {
			require.Equal(t, 4, size, "size of %s (loaded as u32)", name)
		}
	}
}

// member finds a field by name, looking into anonymous unions and
// structs (args sits in one); it returns its byte offset and size.
func member(ms []btf.Member, name string, base int) (off, size int, ok bool) {
	for _, m := range ms {
		at := base + int(m.Offset.Bytes())
		if m.Name == name {
			sz, err := btf.Sizeof(m.Type)
			return at, sz, err == nil
		}
		if m.Name == "" {
			var inner []btf.Member
			switch t := btf.UnderlyingType(m.Type).(type) {
			case *btf.Union:
				inner = t.Members
			case *btf.Struct:
				inner = t.Members
			}
			if off, size, ok := member(inner, name, at); ok {
				return off, size, true
			}
		}
	}
	return 0, 0, false
}
