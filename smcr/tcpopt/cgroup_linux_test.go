package tcpopt

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCgroup2Mount(t *testing.T) {
	cases := []struct {
		name, mountinfo   string
		wantMount, wantRt string
		wantErr           bool
	}{
		{
			name: "hybrid",
			mountinfo: "25 30 0:23 / /sys rw,nosuid - sysfs sysfs rw\n" +
				"31 25 0:27 / /sys/fs/cgroup ro - tmpfs tmpfs ro,mode=755\n" +
				"32 31 0:28 / /sys/fs/cgroup/unified rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate\n" +
				"33 31 0:29 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n",
			wantMount: "/sys/fs/cgroup/unified", wantRt: "/",
		},
		{
			name:      "unified, optional fields",
			mountinfo: "35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 master:2 - cgroup2 cgroup2 rw\n",
			wantMount: "/sys/fs/cgroup", wantRt: "/",
		},
		{
			name:      "escaped blank, subtree root",
			mountinfo: "40 24 0:30 /a\\040b /mnt/cg\\040v2 rw - cgroup2 none rw\n",
			wantMount: "/mnt/cg v2", wantRt: "/a b",
		},
		{
			name:      "cgroup2 only as a source name",
			mountinfo: "40 24 0:30 / /mnt rw - tmpfs cgroup2 rw\n",
			wantErr:   true,
		},
		{name: "none", mountinfo: "25 30 0:23 / /sys rw - sysfs sysfs rw\n", wantErr: true},
		{name: "short line", mountinfo: "cgroup2 - cgroup2\n", wantErr: true},
		{name: "empty", wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mnt, root, err := cgroup2Mount(strings.NewReader(tc.mountinfo))
			if tc.wantErr {
				require.ErrorIs(t, err, ErrUnsupported)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.wantMount, mnt)
			require.Equal(t, tc.wantRt, root)
		})
	}
}

func TestCgroup2Path(t *testing.T) {
	cases := []struct {
		name, cgroup, want string
		wantErr            bool
	}{
		{"hybrid", "9:name=systemd:/\n4:memory:/x/y\n0::/user.slice/a.scope\n", "/user.slice/a.scope", false},
		{"root", "0::/\n", "/", false},
		{"v1 only", "4:memory:/x\n1:cpu:/\n", "", true},
		{"relative", "0::x\n", "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := cgroup2Path(strings.NewReader(tc.cgroup))
			if tc.wantErr {
				require.ErrorIs(t, err, ErrUnsupported)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestJoinCgroup(t *testing.T) {
	cases := []struct {
		mnt, root, rel, want string
		wantErr              bool
	}{
		{"/sys/fs/cgroup/unified", "/", "/", "/sys/fs/cgroup/unified", false},
		{"/sys/fs/cgroup", "/", "/system.slice/x.service", "/sys/fs/cgroup/system.slice/x.service", false},
		{"/sys/fs/cgroup", "/a", "/a/b", "/sys/fs/cgroup/b", false},
		{"/sys/fs/cgroup", "/a", "/a", "/sys/fs/cgroup", false},
		{"/sys/fs/cgroup", "/a", "/ab", "", true},
		{"/sys/fs/cgroup", "/a", "/b", "", true},
		{"/sys/fs/cgroup", "/", "/gone (deleted)", "", true},
	}
	for _, tc := range cases {
		got, err := joinCgroup(tc.mnt, tc.root, tc.rel)
		if tc.wantErr {
			require.ErrorIs(t, err, ErrUnsupported, "%+v", tc)
			continue
		}
		require.NoError(t, err, "%+v", tc)
		require.Equal(t, tc.want, got)
	}
}

// TestOwnCgroup: on this host the process's cgroup v2 directory exists
// and is one (it has cgroup.procs).
func TestOwnCgroup(t *testing.T) {
	dir, err := ownCgroup()
	if err != nil {
		t.Skipf("no cgroup v2 here: %v", err)
	}
	_, err = os.Stat(dir + "/cgroup.procs")
	require.NoError(t, err, "cgroup directory %s", dir)
}
