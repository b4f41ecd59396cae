//go:build linux

package main

import (
	"bufio"
	"compress/gzip"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFailoverCommands(t *testing.T) {
	var fo []testCase
	for _, c := range cases() {
		if c.smc != nil && c.smc.failover {
			fo = append(fo, c)
		}
	}
	require.Len(t, fo, 2, "one case each way")
	assert.Equal(t, goroceServer, fo[0].server)
	assert.Equal(t, guestServer, fo[1].server)
	for _, c := range fo {
		assert.Contains(t, c.name(), " failover", "-run failover selects it")
		assert.Equal(t, "16m", sizeList(c.smc.sizes), "a 16 MiB echo")
	}

	c := fo[0]
	assert.Equal(t, "smcguest client 198.18.0.1 20000 -conns 1 -sizes 16m -end shut -timeout 136s -hold-at 8m,16m -hold /tmp/failover",
		strings.Join(c.guestSMCCommand(20000, guestEnds), " "))
	assert.Equal(t, "smcat -v -ueid GOROCE-INTEROP-UEID -dev 198.18.0.2 -dev 198.18.0.1 -testlink 2s -l -k --echo -n 1 198.18.0.1 20000",
		strings.Join(smcatCommand(&c, guestEnds, 20000), " "), "the first device is the one cut; TCP stays on the other")
	c = fo[1]
	assert.Equal(t, "smcguest server 20000 -n 1 -timeout 136s", strings.Join(c.guestSMCCommand(20000, guestEnds), " "))
	assert.Equal(t, "smcat -v -ueid GOROCE-INTEROP-UEID -dev 198.18.0.2 -dev 198.18.0.1 -testlink 2s -s 198.18.0.1 198.18.0.11 20000",
		strings.Join(smcatCommand(&c, guestEnds, 20000), " "))
	assert.Equal(t, []int{8 << 20, 16 << 20}, failoverHolds([]int{16 << 20}))
}

// guestListings returns smcguest lgr's two listings of a real run
// (testdata/failover-gorocesrv.failover.txt: the 6.12 guest as client,
// before the cut and after the address came back).
func guestListings(t *testing.T) (before, after string) {
	b, err := os.ReadFile(filepath.Join("testdata", "failover-gorocesrv.failover.txt"))
	require.NoError(t, err)
	parts := strings.Split(string(b), "\n# ")
	require.Len(t, parts, 3)
	return parts[0], parts[2]
}

func TestGuestListings(t *testing.T) {
	before, after := guestListings(t)
	assert.Equal(t, 2, activeLinks(before))
	assert.Equal(t, 2, activeLinks(after))
	assert.Equal(t, 1, activeLinks(strings.Replace(before, "link.2.state=active", "link.2.state=activating", 1)))
	assert.Equal(t, 0, activeLinks("lgrs=0\nlinks=0"))
	assert.Equal(t, map[string]int{"198.18.0.2": 1, "198.18.0.1": 0}, connsByPeer(before), "the connection on the first link")
	assert.Equal(t, map[string]int{"198.18.0.2": 0, "198.18.0.1": 1}, connsByPeer(after), "moved to the surviving one")
}

// readSMCLines reads a failover capture's SMC lines (rocedump's text, LLC
// and CDC only: testdata/failover-*.smc.txt.gz are this harness's real
// runs against Linux 6.12, goroce serving and the kernel serving).
func readSMCLines(t *testing.T, name string) []string {
	f, err := os.Open(filepath.Join("testdata", name))
	require.NoError(t, err)
	defer f.Close()
	z, err := gzip.NewReader(f)
	require.NoError(t, err)
	var lines []string
	sc := bufio.NewScanner(z)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	require.NoError(t, sc.Err())
	return lines
}

func wireOf(lines []string) []smcMsg {
	w := newSMCWire()
	for _, l := range lines {
		w.add(l, func(a string) string { return a })
	}
	return w.msgs
}

func TestCheckFailoverWire(t *testing.T) {
	for _, name := range []string{"failover-gorocesrv.smc.txt.gz", "failover-kernelsrv.smc.txt.gz"} {
		t.Run(name, func(t *testing.T) {
			lines := readSMCLines(t, name)
			assert.Empty(t, checkFailoverWire(wireOf(lines)))

			without := func(drop func(string) bool) []smcMsg {
				var keep []string
				for _, l := range lines {
					if !drop(l) {
						keep = append(keep, l)
					}
				}
				return wireOf(keep)
			}
			f := checkFailoverWire(without(func(l string) bool { return strings.Contains(l, "DELETE_LINK_v2 len 44 link ") }))
			assert.Equal(t, []string{"no DELETE_LINK of one link on the wire after 198.18.0.2 was taken away"}, f)

			f = checkFailoverWire(without(func(l string) bool { return strings.Contains(l, "failover_validation") }))
			assert.Contains(t, strings.Join(f, "\n"), "is no failover_validation")

			// The link added again: its ADD_LINK is the last one that
			// is not rejected.
			last := ""
			for _, l := range lines {
				if strings.Contains(l, " LLC ADD_LINK_v2 len") {
					last = l[:strings.Index(l, " qpn")]
				}
			}
			require.NotEmpty(t, last)
			f = checkFailoverWire(without(func(l string) bool { return strings.HasPrefix(l, last) }))
			assert.Contains(t, strings.Join(f, "\n"), "no link added again after the DELETE_LINK")

			// CDCs that never left the first link.
			f = checkFailoverWire(without(func(l string) bool { return strings.Contains(l, "smc CDC") && strings.Contains(l, "198.18.0.1.4791") }))
			assert.Contains(t, strings.Join(f, "\n"), "no CDC on the surviving link (198.18.0.11, 198.18.0.1) after the DELETE_LINK")
		})
	}
}

func TestCheckFailover(t *testing.T) {
	c := testCase{server: goroceServer, smc: &smcSpec{conns: 1, sizes: []int{16 << 20}, failover: true}}
	before, after := guestListings(t)
	good := func() *result {
		cc := newCaptureCheck()
		cc.smc.msgs = wireOf(readSMCLines(t, "failover-gorocesrv.smc.txt.gz"))
		return &result{cap: cc, smc: &smcOutcome{failover: &failoverOutcome{lgrTwo: before, lgrAgain: after, cut: true, restored: true,
			linkDown: "smcat: link group 0x00000100 (server, ASYMMETRIC_PEER): link 1 down: smcr: the device on 198.18.0.2:4791 cannot send"}}}
	}
	assert.Empty(t, checkFailover(&c, good()))
	r := good()
	r.smc.failover.lgrTwo = "lgrs=1\nlgr.0.link.1.state=active\nlinks=1"
	assert.Equal(t, []string{"before 198.18.0.2 was taken away the guest listed 1 active link(s), not 2: lgrs=1 lgr.0.link.1.state=active links=1"}, checkFailover(&c, r))
	r = good()
	r.smc.failover.lgrAgain = "lgrs=1\nlinks=1"
	assert.Contains(t, checkFailover(&c, r)[0], "of 198.18.0.2's return the guest listed 0 active link(s), not 2")
	r = good()
	r.smc.failover.lgrAgain = before // two links, the connection still on the first
	assert.Equal(t, []string{"after the failover the guest listed 0 connection(s) on its link to 198.18.0.1 (the surviving one), not 1"}, checkFailover(&c, r))
	r = good()
	r.smc.failover.lgrTwo = after
	assert.Equal(t, []string{"before the cut the guest listed 0 connection(s) on its link to 198.18.0.2, not 1"}, checkFailover(&c, r))
	r = good()
	r.smc.failover.linkDown = ""
	assert.Equal(t, []string{"goroce reported no link down within 30s of 198.18.0.2's removal"}, checkFailover(&c, r))
	r = good()
	r.smc.failover.cut = false
	assert.Equal(t, []string{"198.18.0.2 was not taken away"}, checkFailover(&c, r))
}

func TestDriveClientHolds(t *testing.T) {
	cat, err := exec.LookPath("cat")
	if err != nil {
		t.Skip("no cat")
	}
	start := func(cmd *exec.Cmd) (*proc, error) { return newProcs().start("cat", cmd) }
	var held []int
	hold := &streamHold{at: []int64{100000, 1<<20 + 1}}
	hold.do = func(i int, stderr func() string) { held = append(held, i) }
	r := driveClient(context.Background(), start, exec.Command(cat), 0, []int{1, 1 << 20}, 0, false, hold, time.Now().Add(20*time.Second))
	assert.Equal(t, 0, r.rc)
	assert.Empty(t, r.mismatch)
	assert.Equal(t, []int{0, 1}, held, "each hold once, in order, the last at the stream's end")
	assert.Equal(t, int64(1<<20+1), r.sent)
	assert.Equal(t, r.sent, r.echoed)
	assert.Equal(t, 7, hold.until(0, 99993, 64<<10), "the writer stops at the hold point")
	assert.Equal(t, 10, hold.until(2, 5, 10), "past the last hold")
}
