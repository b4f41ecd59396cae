//go:build linux

package main

// goroce's own guest programs (smcguest) go into the guest through a small
// second archive appended to the cached initramfs: the kernel unpacks
// concatenated archives in turn, so the cached image (keyed by package
// versions) need not be rebuilt when the program changes.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// smcguestPkg is the guest SMC program's package, built from the
// repository root (where make interop runs the harness).
const smcguestPkg = "./conformance/interop/smcguest"

// buildSMCGuest builds smcguest as a static linux/amd64 program into dir.
func buildSMCGuest(ctx context.Context, dir string) (string, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("building smcguest: no go command in PATH (run the harness with make interop, or put Go in root's PATH)")
	}
	dst, err := filepath.Abs(filepath.Join(dir, "smcguest"))
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, goTool, "build", "-trimpath", "-o", dst, smcguestPkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building smcguest (go build %s, from the repository root): %v\n%s", smcguestPkg, err, tail(string(out), 20))
	}
	return dst, nil
}

// overlayInitrd writes dst: the initramfs base, padded with zeros to a
// multiple of 4 bytes (the kernel looks for a following archive's header
// only there), then an uncompressed newc archive with files (archive path
// → host file), each mode 0755.
func overlayInitrd(base, dst string, files map[string]string) (string, error) {
	b, err := os.ReadFile(base)
	if err != nil {
		return "", fmt.Errorf("initramfs: %w", err)
	}
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	a := newCpioArchive()
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		data, err := os.ReadFile(files[p])
		if err != nil {
			return "", fmt.Errorf("initramfs overlay: %w", err)
		}
		a.addFile(p, 0o755, data)
	}
	var buf bytes.Buffer
	if err := a.writeTo(&buf); err != nil {
		return "", err
	}
	if err := os.WriteFile(dst, append(b, buf.Bytes()...), 0o644); err != nil {
		return "", err
	}
	logf("initramfs %s: %s with %s added", dst, filepath.Base(base), strings.Join(paths, ", "))
	return dst, nil
}
