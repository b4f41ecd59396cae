package rundir_test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goroce/goroce/internal/rundir"
	"github.com/goroce/goroce/internal/rundir/rundirtest"
)

// Root lists every user's run directory at the default places, each
// believed only as its owner's: a user's publisher is read (DialAs) as
// that user's, never as root's own.
func TestDirsForRootListEveryUser(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	t.Setenv("GOROCE_RUN_DIR", filepath.Join(t.TempDir(), "root"))
	rundir.SetRuntimeRoot(t, t.TempDir())
	rundirtest.ForeignPublisher(t, tmp, "x.sock", "hello\n")
	theirs := rundir.Dir{Path: filepath.Join(tmp, "goroce-65534"), UID: rundirtest.Nobody}

	dirs := rundir.Dirs()
	require.Len(t, dirs, 2, "%+v", dirs)
	assert.Equal(t, rundir.Dir{Path: os.Getenv("GOROCE_RUN_DIR"), UID: 0}, dirs[0], "root's own first")
	assert.Equal(t, theirs, dirs[1])
	paths, err := rundir.Sockets(theirs, nil)
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(theirs.Path, "x.sock")}, paths)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := rundir.DialAs(ctx, paths[0], rundirtest.Nobody)
	require.NoError(t, err, "root reads a user's socket as that user's")
	line, err := bufio.NewReader(c).ReadString('\n')
	c.Close()
	require.NoError(t, err)
	assert.Equal(t, "hello\n", line)

	_, err = rundir.Dial(ctx, paths[0])
	require.ErrorIs(t, err, rundir.ErrUntrusted, "nor as root's own")
	_, err = rundir.Sockets(rundir.Dir{Path: theirs.Path, UID: 4242}, nil)
	require.ErrorIs(t, err, rundir.ErrUntrusted, "a directory is checked against the user its name says")
	assert.Contains(t, err.Error(), "belongs to uid 65534")
}

// Anyone but root lists only its own run directory.
func TestDirsForAUser(t *testing.T) {
	t.Setenv("GOROCE_RUN_DIR", t.TempDir())
	rundir.SetUID(t, 4242)
	assert.Equal(t, []rundir.Dir{{Path: os.Getenv("GOROCE_RUN_DIR"), UID: 4242}}, rundir.Dirs())
}
