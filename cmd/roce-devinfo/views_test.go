package main

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/cq"
	"github.com/goroce/goroce/internal/rundir/rundirtest"
	"github.com/goroce/goroce/qp"
	"github.com/goroce/goroce/rocev2"
	"github.com/goroce/goroce/rocev2/backend/memlink"
	"github.com/goroce/goroce/rocev2/device"
)

// running is a published device with an RC queue pair in RTS (towards a
// made-up peer), its CQ and a region.
type running struct {
	dev *device.Device
	qp  *qp.QP
	cq  *cq.CQ
	mr  *device.MR
	pd  *device.PD
}

func startRunning(t *testing.T, network *memlink.Network, addr string) *running {
	t.Helper()
	be, err := network.Attach(netip.MustParseAddrPort(addr))
	require.NoError(t, err)
	dev, err := device.New(device.Config{Backend: be})
	require.NoError(t, err)
	t.Cleanup(func() { dev.Close() })
	r := &running{dev: dev, pd: dev.AllocPD()}
	r.cq, err = cq.New(64, cq.Config{})
	require.NoError(t, err)
	r.mr, err = r.pd.RegisterMR(make([]byte, 4096), device.AccessLocalWrite)
	require.NoError(t, err)
	r.qp, err = qp.Create(r.pd, qp.InitAttr{Type: qp.RC, SendCQ: r.cq, RecvCQ: r.cq, Cap: qp.Cap{MaxSendWR: 8, MaxRecvWR: 8}})
	require.NoError(t, err)
	gid, _ := dev.GID(1)
	require.NoError(t, r.qp.Modify(&qp.Attr{State: qp.Init, Port: 1}, qp.MaskState|qp.MaskPKeyIndex|qp.MaskPort|qp.MaskAccessFlags))
	require.NoError(t, r.qp.Modify(&qp.Attr{State: qp.RTR, PathMTU: rocev2.MTU1024, DestQPN: 0x123456, RQPSN: 1000, MaxDestRdAtomic: 1,
		AH: qp.AH{DGID: gid, SGIDIndex: 1}}, qp.MaskState|qp.MaskAV|qp.MaskPathMTU|qp.MaskDestQPN|qp.MaskRQPSN|qp.MaskMaxDestRdAtomic|qp.MaskMinRNRTimer))
	require.NoError(t, r.qp.Modify(&qp.Attr{State: qp.RTS, SQPSN: 2000, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1},
		qp.MaskState|qp.MaskSQPSN|qp.MaskTimeout|qp.MaskRetryCnt|qp.MaskRNRRetry|qp.MaskMaxQPRdAtomic))
	require.NoError(t, dev.Publish(""))
	return r
}

// res show and statistic list every running device's objects and
// counters in rdma's layout and with its JSON field names.
func TestResViews(t *testing.T) {
	t.Setenv("GOROCE_RUN_DIR", t.TempDir())
	network := memlink.NewNetwork()
	a := startRunning(t, network, "127.0.0.21:4791")
	b := startRunning(t, network, "127.0.0.22:4791")
	pid := os.Getpid()
	comm := strings.Fields(mustRead(t, "/proc/self/comm"))[0]

	code, out, errOut := runDevinfo(t, "res", "show", "qp")
	require.Equal(t, 0, code, errOut)
	want := ""
	for _, r := range []*running{a, b} {
		want += fmt.Sprintf("link goroce0/1 lqpn %d rqpn 1193046 type RC state RTS rq-psn 1000 sq-psn 2000 path-mig-state MIGRATED path-mtu 1024 pdn %d pid %d comm %s \n",
			r.qp.QPN(), r.pd.PDN(), pid, comm)
	}
	assert.Equal(t, want, out)

	code, out, errOut = runDevinfo(t, "-j", "-d", "127.0.0.22", "res", "show", "qp")
	require.Equal(t, 0, code, errOut)
	var qps []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &qps), out)
	require.Len(t, qps, 1, "-d selects the device on its address")
	assert.Equal(t, map[string]any{
		"ifindex": 1.0, "ifname": "goroce0", "port": 1.0, "lqpn": float64(b.qp.QPN()), "rqpn": float64(0x123456),
		"type": "RC", "state": "RTS", "rq-psn": 1000.0, "sq-psn": 2000.0, "path-mig-state": "MIGRATED",
		"path-mtu": 1024.0, "pdn": float64(b.pd.PDN()), "pid": float64(pid), "comm": comm,
	}, qps[0])
	assert.True(t, strings.HasPrefix(out, `[{"ifindex":1,"ifname":"goroce0","port":1,"lqpn":`), "rdma's key order: %s", out)

	code, out, _ = runDevinfo(t, "-d", "127.0.0.21", "res", "cq")
	require.Equal(t, 0, code)
	assert.Equal(t, fmt.Sprintf("dev goroce0 cqn %d cqe 64 users 1 pid %d comm %s \n", a.cq.ID(), pid, comm), out)
	code, out, _ = runDevinfo(t, "-d", "127.0.0.21", "resource", "show", "mr")
	require.Equal(t, 0, code)
	assert.Equal(t, fmt.Sprintf("dev goroce0 mrn %d rkey %#x lkey %#x iova %#x mrlen 4096 pdn %d pid %d comm %s \n",
		a.mr.MRN(), a.mr.RKey(), a.mr.LKey(), a.mr.VA(), a.pd.PDN(), pid, comm), out)
	code, out, _ = runDevinfo(t, "-j", "-d", "127.0.0.21", "res", "show", "mr")
	require.Equal(t, 0, code)
	assert.Contains(t, out, fmt.Sprintf(`"rkey":"%#x","lkey":"%#x"`, a.mr.RKey(), a.mr.LKey()), "keys are hex strings, as rdma's")
	code, out, _ = runDevinfo(t, "-d", "127.0.0.21", "res", "show", "pd")
	require.Equal(t, 0, code)
	assert.Equal(t, fmt.Sprintf("dev goroce0 pdn %d users 2 pid %d comm %s \n", a.pd.PDN(), pid, comm), out)
	code, out, _ = runDevinfo(t, "res")
	require.Equal(t, 0, code)
	assert.Equal(t, fmt.Sprintf("1: goroce0: pd 1 cq 1 qp 1 mr 1 pid %d comm %s addr 127.0.0.21:4791\n2: goroce0: pd 1 cq 1 qp 1 mr 1 pid %d comm %s addr 127.0.0.22:4791\n", pid, comm, pid, comm), out)

	a.dev.Counters.SentPkts.Add(3)
	code, out, _ = runDevinfo(t, "-d", "127.0.0.21", "statistic")
	require.Equal(t, 0, code)
	assert.True(t, strings.HasPrefix(out, fmt.Sprintf("link goroce0/1 addr 127.0.0.21:4791 pid %d comm %s sent_pkts 3 rcvd_pkts 0 ", pid, comm)), out)
	assert.Equal(t, 1, strings.Count(out, "\n"), "one line per device")
	code, out, _ = runDevinfo(t, "-d", "127.0.0.21", "-p", "stat", "show")
	require.Equal(t, 0, code)
	assert.True(t, strings.HasPrefix(out, "link goroce0/1\n    addr 127.0.0.21:4791\n"), out)
	assert.Contains(t, out, "\n    sent_pkts 3\n")
	code, out, _ = runDevinfo(t, "-j", "statistic")
	require.Equal(t, 0, code)
	var stats []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &stats), out)
	require.Len(t, stats, 2)
	assert.Equal(t, 3.0, stats[0]["sent_pkts"])
	assert.Equal(t, "goroce0", stats[0]["ifname"])
	assert.Equal(t, 1.0, stats[0]["port"])

	// A queue pair that is gone is gone from the view; a device that stopped
	// publishing too.
	require.NoError(t, a.qp.Destroy())
	code, out, _ = runDevinfo(t, "-d", "127.0.0.21", "res", "show", "qp")
	require.Equal(t, 0, code)
	assert.Empty(t, out)
	require.NoError(t, b.dev.Close())
	code, out, errOut = runDevinfo(t, "-d", "127.0.0.22", "-j", "res", "show", "qp")
	require.Equal(t, 0, code)
	assert.Equal(t, "[]\n", out)
	code, out, errOut = runDevinfo(t, "-d", "127.0.0.22", "res", "show", "qp")
	require.Equal(t, 0, code)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "no running goroce device publishes on 127.0.0.22")
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("%s: %v", path, err)
	}
	return string(b)
}

// As root the views and -counters read every user's devices, each
// believed as its owner's (root only: it runs a publisher as nobody).
func TestRootSeesEveryUsersDevices(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	t.Setenv("XDG_RUNTIME_DIR", "")
	t.Setenv("GOROCE_RUN_DIR", t.TempDir())
	snapshot := "goroce-device 2\nname goroce0\naddr 127.0.0.9:4791\npid 31337\ncomm theirs\ncounter sent_pkts 42\n" +
		"qp lqpn 17 type UD state RTS port 1 sq-psn 5 path-mtu 4096 pdn 1\n"
	rundirtest.ForeignPublisher(t, tmp, filepath.Base(device.PublishPath("", netip.MustParseAddrPort("127.0.0.9:4791"))), snapshot)

	code, out, errOut := runDevinfo(t, "res", "show", "qp")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "link goroce0/1 lqpn 17 type UD state RTS sq-psn 5 path-mtu 4096 pdn 1 pid 31337 comm theirs \n", out)
	code, out, errOut = runDevinfo(t, "-d", "127.0.0.9", "-udp-port", "4791", "-counters")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "link goroce0/1\n    sent_pkts 42\n", out)
}
