//go:build linux

package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/elf"
	_ "embed"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
)

//go:embed init.sh
var guestInit []byte

// imageVersion changes whenever the way images are built changes, so that
// cached images built the old way are not reused.
const imageVersion = "goroce-interop-image-2"

// userPackages are the guest's userland. Their library dependencies are
// added (following only library packages), and from them only what the
// programs load is copied into the image.
var userPackages = []string{
	"busybox-static", "libibverbs1", "ibverbs-providers", "ibverbs-utils",
	"librdmacm1", "rdmacm-utils", "perftest", "iproute2", "libgcc-s1",
}

// guestModules are loaded at boot, with their dependencies first.
// crc32_generic is what rxe's crypto_alloc_shash("crc32") needs: nothing
// depends on it, so it must be named.
var guestModules = []string{
	"virtio_pci", "virtio_net", "crc32_generic",
	"ib_core", "ib_uverbs", "ib_umad", "iw_cm", "ib_cm", "rdma_cm", "rdma_ucm",
	"rdma_rxe", "smc", "smc_diag",
	// Loss: netem on eth0, and on an ifb that eth0's ingress is redirected to.
	"sch_netem", "ifb", "sch_ingress", "cls_matchall", "act_mirred",
	// MAD loss: a prio qdisc whose MAD band (a u32 filter) is a netem.
	"sch_prio", "cls_u32",
}

// iproute2Programs are the programs taken from iproute2 (the others need
// more libraries and are of no use here).
var iproute2Programs = []string{"ip", "tc", "rdma", "ss", "bridge"}

// imageConfig says where to cache and which kernel to boot.
type imageConfig struct {
	cacheDir  string // e.g. /var/cache/goroce-interop
	kernelPkg string // linux-image-amd64 or a versioned linux-image-X package
	update    bool   // run apt-get update first
	logf      func(format string, args ...any)
}

// image is a bootable guest: kernel and initramfs, and what went into them.
type image struct {
	dir, kernel, initrd string
	kernelRelease       string
	packages            []pkgVersion
	cached              bool // found in the cache, not built now
}

type pkgVersion struct{ name, version, arch string }

func (p pkgVersion) String() string { return p.name + "=" + p.version }

// key is the package's file-name form, as apt-get download names it.
func (p pkgVersion) key() string {
	return p.name + "_" + strings.ReplaceAll(p.version, ":", "%3a") + "_" + p.arch
}

// buildImage fetches (or finds in the cache) every package, unpacks each
// into cacheDir/root/NAME_VERSION_ARCH, and builds (or finds) the image in
// cacheDir/images/KEY, KEY being a hash of everything that goes into it.
func buildImage(ctx context.Context, cfg imageConfig) (*image, error) {
	for _, d := range []string{"debs", "root", "images"} {
		if err := os.MkdirAll(filepath.Join(cfg.cacheDir, d), 0o755); err != nil {
			return nil, err
		}
	}
	unlock, err := lockDir(cfg.cacheDir)
	if err != nil {
		return nil, err
	}
	defer unlock()

	if cfg.update {
		cfg.logf("apt-get update")
		if out, err := runOut(ctx, "apt-get", "update"); err != nil {
			// The lists already there may still do.
			cfg.logf("apt-get update failed (going on with the package lists there are): %v\n%s", err, tail(out, 10))
		}
	}
	kpkg, err := resolveKernelPackage(ctx, cfg.kernelPkg)
	if err != nil {
		return nil, err
	}
	libs, err := libraryClosure(ctx, userPackages)
	if err != nil {
		return nil, err
	}
	names := append([]string{kpkg}, userPackages...)
	for _, l := range libs {
		if !slices.Contains(names, l) {
			names = append(names, l)
		}
	}
	pkgs, err := candidateVersions(ctx, names)
	if err != nil {
		return nil, err
	}
	if err := fetchAndUnpack(ctx, cfg, pkgs); err != nil {
		return nil, err
	}

	h := sha256.New()
	fmt.Fprintln(h, imageVersion)
	for _, p := range pkgs {
		fmt.Fprintln(h, p.key())
	}
	fmt.Fprintln(h, strings.Join(guestModules, ","), strings.Join(iproute2Programs, ","))
	h.Write(guestInit)
	key := hex.EncodeToString(h.Sum(nil))[:16]
	img := &image{dir: filepath.Join(cfg.cacheDir, "images", key), packages: pkgs}
	img.kernel = filepath.Join(img.dir, "vmlinuz")
	img.initrd = filepath.Join(img.dir, "initrd.img")
	if rel, err := os.ReadFile(filepath.Join(img.dir, "release")); err == nil {
		if _, err := os.Stat(img.initrd); err == nil {
			img.kernelRelease = strings.TrimSpace(string(rel))
			img.cached = true
			cfg.logf("image %s (cached)", img.dir)
			return img, nil
		}
	}
	cfg.logf("building image %s", img.dir)
	tmp := img.dir + ".tmp"
	os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, err
	}
	rel, manifest, err := assemble(ctx, cfg, pkgs, tmp)
	if err != nil {
		return nil, err
	}
	var m bytes.Buffer
	for _, p := range pkgs {
		fmt.Fprintf(&m, "package %s\n", p)
	}
	m.WriteString(manifest)
	if err := os.WriteFile(filepath.Join(tmp, "manifest.txt"), m.Bytes(), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(tmp, "release"), []byte(rel+"\n"), 0o644); err != nil {
		return nil, err
	}
	os.RemoveAll(img.dir)
	if err := os.Rename(tmp, img.dir); err != nil {
		return nil, err
	}
	img.kernelRelease = rel
	return img, nil
}

// lockDir takes an exclusive lock on dir/.lock, so that two runs do not
// fill the same cache at once.
func lockDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

// resolveKernelPackage follows metapackages such as linux-image-amd64 or
// linux-image-6.12-amd64 to the package with the kernel in it: the first
// one that depends on no other linux-image package.
func resolveKernelPackage(ctx context.Context, name string) (string, error) {
	for range 4 {
		deps, err := aptDepends(ctx, name)
		if err != nil {
			return "", err
		}
		next := ""
		for _, d := range deps[name] {
			if strings.HasPrefix(d, "linux-image-") {
				next = d
				break
			}
		}
		if next == "" {
			return name, nil
		}
		name = next
	}
	return "", fmt.Errorf("kernel package %s: too many metapackages", name)
}

func isLibraryPackage(name string) bool {
	return strings.HasPrefix(name, "lib") || name == "zlib1g"
}

// libraryClosure returns the library packages that roots depend on,
// directly or through other library packages.
func libraryClosure(ctx context.Context, roots []string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	queue := slices.Clone(roots)
	for _, r := range roots {
		seen[r] = true
	}
	for len(queue) > 0 {
		deps, err := aptDepends(ctx, queue...)
		if err != nil {
			return nil, err
		}
		queue = nil
		for _, ds := range deps {
			for _, d := range ds {
				if seen[d] || !isLibraryPackage(d) {
					continue
				}
				seen[d] = true
				out = append(out, d)
				queue = append(queue, d)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// aptDepends runs apt-cache depends and returns, per package, the packages
// it Depends or Pre-Depends on: of alternatives the first, of a virtual
// package its first provider.
func aptDepends(ctx context.Context, pkgs ...string) (map[string][]string, error) {
	args := append([]string{"depends", "--no-recommends", "--no-suggests", "--no-conflicts",
		"--no-breaks", "--no-replaces", "--no-enhances"}, pkgs...)
	out, err := runOut(ctx, "apt-cache", args...)
	if err != nil {
		return nil, fmt.Errorf("apt-cache depends %s: %v\n%s", strings.Join(pkgs, " "), err, tail(out, 10))
	}
	return parseAptDepends(out), nil
}

func parseAptDepends(out string) map[string][]string {
	res := map[string][]string{}
	cur := ""
	inGroup := false  // within an "a | b | c" group whose first member was taken
	wantProv := false // the last dependency was virtual: take its first provider
	for _, line := range strings.Split(out, "\n") {
		switch {
		case line == "":
			continue
		case line[0] != ' ':
			cur = strings.TrimSpace(line)
			inGroup, wantProv = false, false
			continue
		case strings.HasPrefix(line, "    "): // a provider of a virtual package
			if wantProv {
				res[cur] = append(res[cur], stripArch(line))
				wantProv = false
			}
			continue
		case len(line) < 3:
			continue
		}
		wantProv = false
		alt := line[1] == '|' // this one or the next
		kind, name, ok := strings.Cut(strings.TrimSpace(line[2:]), ": ")
		wasInGroup := inGroup
		inGroup = alt
		if !ok || (kind != "Depends" && kind != "PreDepends") || wasInGroup {
			continue
		}
		if strings.HasPrefix(name, "<") {
			wantProv = true
			continue
		}
		res[cur] = append(res[cur], stripArch(name))
	}
	return res
}

func stripArch(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), ":")
	return s
}

// candidateVersions asks apt-cache for the version apt would install of
// each package.
func candidateVersions(ctx context.Context, names []string) ([]pkgVersion, error) {
	out, err := runOut(ctx, "apt-cache", append([]string{"show", "--no-all-versions"}, names...)...)
	if err != nil {
		return nil, fmt.Errorf("apt-cache show: %v\n%s", err, tail(out, 10))
	}
	got := map[string]pkgVersion{}
	var p pkgVersion
	flush := func() {
		if p.name != "" && p.version != "" {
			if _, ok := got[p.name]; !ok {
				got[p.name] = p
			}
		}
		p = pkgVersion{}
	}
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(line, ": ")
		switch {
		case line == "":
			flush()
		case ok && k == "Package":
			p.name = v
		case ok && k == "Version":
			p.version = v
		case ok && k == "Architecture":
			p.arch = v
		}
	}
	flush()
	var res []pkgVersion
	for _, n := range names {
		v, ok := got[n]
		if !ok {
			return nil, fmt.Errorf("apt-cache knows no package %s (did apt-get update run?)", n)
		}
		res = append(res, v)
	}
	return res, nil
}

// fetchAndUnpack downloads the packages not yet in cacheDir/debs with
// apt-get download and unpacks those not yet in cacheDir/root.
func fetchAndUnpack(ctx context.Context, cfg imageConfig, pkgs []pkgVersion) error {
	debs := filepath.Join(cfg.cacheDir, "debs")
	var missing []string
	for _, p := range pkgs {
		if _, err := os.Stat(filepath.Join(cfg.cacheDir, "root", p.key())); err == nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(debs, p.key()+".deb")); err != nil {
			missing = append(missing, p.name+"="+p.version)
		}
	}
	if len(missing) > 0 {
		cfg.logf("apt-get download %s", strings.Join(missing, " "))
		cmd := exec.CommandContext(ctx, "apt-get", append([]string{"download", "-q", "-o", "APT::Sandbox::User=root"}, missing...)...)
		cmd.Dir = debs
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get download: %v\n%s", err, tail(string(out), 20))
		}
	}
	for _, p := range pkgs {
		dst := filepath.Join(cfg.cacheDir, "root", p.key())
		if _, err := os.Stat(dst); err == nil {
			continue
		}
		deb := filepath.Join(debs, p.key()+".deb")
		cfg.logf("unpacking %s", filepath.Base(deb))
		tmp := dst + ".tmp"
		os.RemoveAll(tmp)
		if out, err := runOut(ctx, "dpkg-deb", "-x", deb, tmp); err != nil {
			return fmt.Errorf("dpkg-deb -x %s: %v\n%s", deb, err, tail(out, 10))
		}
		if err := os.Rename(tmp, dst); err != nil {
			return err
		}
	}
	return nil
}

// assemble writes vmlinuz and initrd.img into dir and returns the kernel
// release and a manifest of the image's contents.
func assemble(ctx context.Context, cfg imageConfig, pkgs []pkgVersion, dir string) (string, string, error) {
	root := func(p pkgVersion) string { return filepath.Join(cfg.cacheDir, "root", p.key()) }
	kroot := root(pkgs[0])
	var manifest strings.Builder

	// The kernel.
	vmlinuz, _ := filepath.Glob(filepath.Join(kroot, "boot", "vmlinuz-*"))
	mods, _ := filepath.Glob(filepath.Join(kroot, "lib", "modules", "*"))
	if len(vmlinuz) != 1 || len(mods) != 1 {
		return "", "", fmt.Errorf("%s: want one boot/vmlinuz-* and one lib/modules/*, found %v and %v", kroot, vmlinuz, mods)
	}
	rel := filepath.Base(mods[0])
	if err := copyFile(vmlinuz[0], filepath.Join(dir, "vmlinuz")); err != nil {
		return "", "", err
	}

	a := newCpioArchive()
	for _, d := range []string{"proc", "sys", "dev", "tmp", "run", "root", "etc", "var/tmp", "bin", "sbin", "usr/bin", "usr/sbin"} {
		a.mkdirAll(d)
	}
	a.addFile("init", 0o755, guestInit)
	a.addFile("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\n"))
	a.addFile("etc/group", 0o644, []byte("root:x:0:\n"))
	a.addFile("etc/hosts", 0o644, []byte("127.0.0.1 localhost\n198.18.0.1 goroce\n198.18.0.11 guest\n"))

	// Modules, dependencies first.
	order, files, err := moduleOrder(filepath.Join(mods[0], "kernel"), guestModules)
	if err != nil {
		return "", "", err
	}
	for _, m := range order {
		data, err := readModule(ctx, files[m])
		if err != nil {
			return "", "", err
		}
		a.addFile("lib/modules/"+m+".ko", 0o644, data)
		fmt.Fprintf(&manifest, "module %s\n", m)
	}
	a.addFile("etc/modules.order", 0o644, []byte(strings.Join(order, "\n")+"\n"))

	// Userland.
	var roots []string
	for _, p := range pkgs[1:] {
		roots = append(roots, root(p))
	}
	u := &userland{a: a, roots: roots, done: map[string]bool{}}
	byName := map[string]string{}
	for _, p := range pkgs {
		byName[p.name] = root(p)
	}
	bb := filepath.Join(byName["busybox-static"], "bin", "busybox")
	if err := u.copy("bin/busybox"); err != nil {
		return "", "", err
	}
	var progs []string
	for _, pkg := range []string{"ibverbs-utils", "rdmacm-utils", "perftest"} {
		for _, d := range []string{"usr/bin", "usr/sbin", "bin", "sbin"} {
			ents, _ := os.ReadDir(filepath.Join(byName[pkg], d))
			for _, e := range ents {
				if !e.IsDir() {
					progs = append(progs, d+"/"+e.Name())
				}
			}
		}
	}
	for _, prog := range iproute2Programs {
		found := false
		for _, d := range []string{"bin", "sbin", "usr/bin", "usr/sbin"} {
			if _, err := os.Lstat(filepath.Join(byName["iproute2"], d, prog)); err == nil {
				progs = append(progs, d+"/"+prog)
				found = true
				break
			}
		}
		if !found {
			return "", "", fmt.Errorf("iproute2 has no program %s", prog)
		}
	}
	// The rxe provider is dlopen()ed by libibverbs: nothing names it.
	provs, _ := filepath.Glob(filepath.Join(byName["ibverbs-providers"], "usr/lib/*/libibverbs/librxe-rdmav*.so"))
	if len(provs) != 1 {
		return "", "", fmt.Errorf("ibverbs-providers: want one librxe-rdmav*.so, found %v", provs)
	}
	rxeProv, _ := filepath.Rel(byName["ibverbs-providers"], provs[0])
	progs = append(progs, rxeProv, "etc/libibverbs.d/rxe.driver")
	// glibc dlopen()s libgcc_s for pthread_exit and pthread_cancel, which
	// librdmacm's example programs call (rping's CQ thread): without it
	// they abort at exit.
	gcc, _ := filepath.Glob(filepath.Join(byName["libgcc-s1"], "*lib/*/libgcc_s.so.1"))
	if len(gcc) == 0 {
		gcc, _ = filepath.Glob(filepath.Join(byName["libgcc-s1"], "usr/lib/*/libgcc_s.so.1"))
	}
	if len(gcc) != 1 {
		return "", "", fmt.Errorf("libgcc-s1: want one libgcc_s.so.1, found %v", gcc)
	}
	libgcc, _ := filepath.Rel(byName["libgcc-s1"], gcc[0])
	progs = append(progs, libgcc)
	for _, p := range progs {
		if err := u.copy(p); err != nil {
			return "", "", err
		}
		fmt.Fprintf(&manifest, "file %s\n", p)
	}
	for _, d := range []string{"etc/iproute2", "usr/share/iproute2", "usr/lib/tc"} {
		filepath.WalkDir(filepath.Join(byName["iproute2"], d), func(p string, e fs.DirEntry, err error) error {
			if err == nil && !e.IsDir() {
				r, _ := filepath.Rel(byName["iproute2"], p)
				u.copy(r)
			}
			return nil
		})
	}
	// Busybox applets for every name no package program took.
	out, err := runOut(ctx, bb, "--list-full")
	if err != nil {
		return "", "", fmt.Errorf("busybox --list-full: %v", err)
	}
	taken := map[string]bool{}
	for p := range a.entries {
		if strings.Contains(p, "bin/") {
			taken[path.Base(p)] = true
		}
	}
	for _, l := range strings.Fields(out) {
		if !taken[path.Base(l)] && !a.has(l) {
			a.addSymlink(l, "/bin/busybox")
		}
	}
	a.addSymlink("bin/sh", "busybox") // whatever took "sh", init needs busybox's

	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	if err := a.writeTo(zw); err != nil {
		return "", "", err
	}
	if err := zw.Close(); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "initrd.img"), buf.Bytes(), 0o644); err != nil {
		return "", "", err
	}
	cfg.logf("image: kernel %s, initramfs %d files, %.1f MB (%.1f MB gzip)", rel, len(a.entries), float64(a.size())/1e6, float64(buf.Len())/1e6)
	return rel, manifest.String(), nil
}

// userland copies files from the unpacked packages into the archive, with
// every shared library they need (DT_NEEDED, recursively) and their
// program interpreter, found in the library directories of the packages.
type userland struct {
	a     *cpioArchive
	roots []string
	done  map[string]bool
}

var libDirs = []string{"lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "lib64", "usr/lib64", "lib", "usr/lib"}

// find returns the root holding rel (a path relative to /).
func (u *userland) find(rel string) (string, bool) {
	for _, r := range u.roots {
		if _, err := os.Lstat(filepath.Join(r, rel)); err == nil {
			return r, true
		}
	}
	return "", false
}

func (u *userland) copy(rel string) error {
	rel = cleanArchivePath(path.Clean("/" + rel))
	if u.done[rel] {
		return nil
	}
	u.done[rel] = true
	r, ok := u.find(rel)
	if !ok {
		return fmt.Errorf("no package has /%s", rel)
	}
	full := filepath.Join(r, rel)
	st, err := os.Lstat(full)
	if err != nil {
		return err
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		t, err := os.Readlink(full)
		if err != nil {
			return err
		}
		u.a.addSymlink(rel, t)
		if !strings.HasPrefix(t, "/") {
			t = path.Join(path.Dir(rel), t)
		}
		return u.copy(t)
	}
	data, err := os.ReadFile(full)
	if err != nil {
		return err
	}
	u.a.addFile(rel, uint32(st.Mode().Perm()), data)
	if !bytes.HasPrefix(data, []byte("\x7fELF")) {
		return nil
	}
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("/%s: %v", rel, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			interp, _ := io.ReadAll(p.Open())
			if err := u.copy(strings.TrimRight(string(interp), "\x00")); err != nil {
				return fmt.Errorf("interpreter of /%s: %v", rel, err)
			}
		}
	}
	needed, _ := f.ImportedLibraries()
	for _, n := range needed {
		found := false
		for _, d := range libDirs {
			if _, ok := u.find(d + "/" + n); ok {
				if err := u.copy(d + "/" + n); err != nil {
					return err
				}
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("/%s needs %s, which none of the packages has (add its package to userPackages)", rel, n)
		}
	}
	return nil
}

// moduleOrder finds the wanted modules and their dependencies (modinfo
// "depends" and "softdep pre:") under dir and orders them dependencies
// first. It returns the order and each module's file.
func moduleOrder(dir string, wanted []string) ([]string, map[string]string, error) {
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		n := e.Name()
		for _, ext := range []string{".ko", ".ko.xz", ".ko.zst", ".ko.gz"} {
			if strings.HasSuffix(n, ext) {
				files[normModName(strings.TrimSuffix(n, ext))] = p
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	// Modules built into the kernel need no loading (virtio_pci in 6.12).
	builtin := map[string]bool{}
	if b, err := os.ReadFile(filepath.Join(filepath.Dir(dir), "modules.builtin")); err == nil {
		for _, l := range strings.Fields(string(b)) {
			builtin[normModName(strings.TrimSuffix(path.Base(l), ".ko"))] = true
		}
	}
	var order []string
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(m, from string) error
	visit = func(m, from string) error {
		m = normModName(m)
		switch state[m] {
		case 1:
			return fmt.Errorf("module dependency cycle at %s", m)
		case 2:
			return nil
		}
		f, ok := files[m]
		if !ok {
			if from != "" || builtin[m] {
				return nil // built in
			}
			return fmt.Errorf("kernel has no module %s", m)
		}
		state[m] = 1
		deps, err := moduleDeps(f)
		if err != nil {
			return err
		}
		for _, d := range deps {
			if err := visit(d, m); err != nil {
				return err
			}
		}
		state[m] = 2
		order = append(order, m)
		return nil
	}
	for _, w := range wanted {
		if err := visit(w, ""); err != nil {
			return nil, nil, err
		}
	}
	return order, files, nil
}

func normModName(n string) string { return strings.ReplaceAll(n, "-", "_") }

// moduleDeps reads a module's .modinfo section.
func moduleDeps(file string) ([]string, error) {
	data, err := readModule(context.Background(), file)
	if err != nil {
		return nil, err
	}
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	defer f.Close()
	s := f.Section(".modinfo")
	if s == nil {
		return nil, fmt.Errorf("%s: no .modinfo section", file)
	}
	info, err := s.Data()
	if err != nil {
		return nil, err
	}
	return parseModinfoDeps(info), nil
}

func parseModinfoDeps(info []byte) []string {
	var deps []string
	for _, kv := range bytes.Split(info, []byte{0}) {
		k, v, ok := strings.Cut(string(kv), "=")
		if !ok {
			continue
		}
		switch k {
		case "depends":
			for _, d := range strings.Split(v, ",") {
				if d != "" {
					deps = append(deps, d)
				}
			}
		case "softdep":
			// "pre: a b post: c"
			pre := false
			for _, w := range strings.Fields(v) {
				switch w {
				case "pre:":
					pre = true
				case "post:":
					pre = false
				default:
					if pre {
						deps = append(deps, w)
					}
				}
			}
		}
	}
	return deps
}

var moduleCache = map[string][]byte{}

// readModule returns a module file's contents, decompressed.
func readModule(ctx context.Context, file string) ([]byte, error) {
	if d, ok := moduleCache[file]; ok {
		return d, nil
	}
	var data []byte
	var err error
	switch {
	case strings.HasSuffix(file, ".xz"):
		data, err = exec.CommandContext(ctx, "xz", "-dc", file).Output()
	case strings.HasSuffix(file, ".zst"):
		data, err = exec.CommandContext(ctx, "zstd", "-dc", file).Output()
	case strings.HasSuffix(file, ".gz"):
		data, err = exec.CommandContext(ctx, "gzip", "-dc", file).Output()
	default:
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, fmt.Errorf("reading module %s: %v", file, err)
	}
	moduleCache[file] = data
	return data, nil
}

func copyFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o644)
}

// runOut runs a command and returns its combined output.
func runOut(ctx context.Context, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return string(out), err
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func readLines(s string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}
