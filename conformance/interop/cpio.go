//go:build linux

package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// cpioArchive is an initramfs in the making: a set of paths, each a
// directory, a regular file or a symlink. Writing it gives a "newc" cpio
// archive, the format the kernel unpacks, with parents before children.
type cpioArchive struct {
	entries map[string]cpioEntry
}

type cpioEntry struct {
	mode uint32 // file type and permission bits
	data []byte // file contents, or the symlink's target
}

const (
	sIFDIR = 0o040000
	sIFREG = 0o100000
	sIFLNK = 0o120000
)

func newCpioArchive() *cpioArchive { return &cpioArchive{entries: map[string]cpioEntry{}} }

func cleanArchivePath(p string) string { return strings.Trim(p, "/") }

// mkdirAll adds p and its parents as directories (0755).
func (a *cpioArchive) mkdirAll(p string) {
	p = cleanArchivePath(p)
	for p != "" && p != "." {
		if _, ok := a.entries[p]; !ok {
			a.entries[p] = cpioEntry{mode: sIFDIR | 0o755}
		}
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			break
		}
		p = p[:i]
	}
}

func (a *cpioArchive) parent(p string) {
	if i := strings.LastIndexByte(p, '/'); i > 0 {
		a.mkdirAll(p[:i])
	}
}

// addFile adds a regular file with permission bits perm.
func (a *cpioArchive) addFile(p string, perm uint32, data []byte) {
	p = cleanArchivePath(p)
	a.parent(p)
	a.entries[p] = cpioEntry{mode: sIFREG | perm&0o7777, data: data}
}

// addSymlink adds p pointing at target.
func (a *cpioArchive) addSymlink(p, target string) {
	p = cleanArchivePath(p)
	a.parent(p)
	a.entries[p] = cpioEntry{mode: sIFLNK | 0o777, data: []byte(target)}
}

func (a *cpioArchive) has(p string) bool {
	_, ok := a.entries[cleanArchivePath(p)]
	return ok
}

// size is the total size of the file data.
func (a *cpioArchive) size() int {
	n := 0
	for _, e := range a.entries {
		n += len(e.data)
	}
	return n
}

// writeTo writes the archive in newc format, sorted by path (so parents
// come first), ending with the TRAILER!!! entry.
func (a *cpioArchive) writeTo(w io.Writer) error {
	names := make([]string, 0, len(a.entries))
	for n := range a.entries {
		names = append(names, n)
	}
	sort.Strings(names)
	ino := uint32(1)
	for _, n := range names {
		e := a.entries[n]
		nlink := uint32(1)
		if e.mode&0o170000 == sIFDIR {
			nlink = 2
		}
		if err := writeCpioEntry(w, ino, e.mode, nlink, n, e.data); err != nil {
			return err
		}
		ino++
	}
	return writeCpioEntry(w, 0, 0, 1, "TRAILER!!!", nil)
}

func writeCpioEntry(w io.Writer, ino, mode, nlink uint32, name string, data []byte) error {
	// magic, ino, mode, uid, gid, nlink, mtime, filesize, devmajor,
	// devminor, rdevmajor, rdevminor, namesize, check.
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		ino, mode, 0, 0, nlink, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
	buf := make([]byte, 0, len(hdr)+len(name)+8)
	buf = append(buf, hdr...)
	buf = append(buf, name...)
	buf = append(buf, 0)
	buf = pad4(buf)
	if _, err := w.Write(buf); err != nil {
		return err
	}
	if len(data) == 0 {
		return nil
	}
	if _, err := w.Write(data); err != nil {
		return err
	}
	if r := len(data) % 4; r != 0 {
		_, err := w.Write(make([]byte, 4-r))
		return err
	}
	return nil
}

func pad4(b []byte) []byte {
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}
