package device

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unsafe"
)

// Access is a set of memory access rights, numbered like ibv_access_flags.
type Access uint32

const (
	AccessLocalWrite   Access = 1 << 0
	AccessRemoteWrite  Access = 1 << 1
	AccessRemoteRead   Access = 1 << 2
	AccessRemoteAtomic Access = 1 << 3
	AccessMWBind       Access = 1 << 4
)

func (a Access) String() string {
	var s []string
	for _, f := range []struct {
		bit  Access
		name string
	}{{AccessLocalWrite, "LOCAL_WRITE"}, {AccessRemoteWrite, "REMOTE_WRITE"}, {AccessRemoteRead, "REMOTE_READ"}, {AccessRemoteAtomic, "REMOTE_ATOMIC"}, {AccessMWBind, "MW_BIND"}} {
		if a&f.bit != 0 {
			s = append(s, f.name)
		}
	}
	if len(s) == 0 {
		return "0"
	}
	return strings.Join(s, "|")
}

// PD is a protection domain: a QP may only touch memory registered in its own.
type PD struct {
	dev *Device
	id  uint32
}

// Device returns the PD's device.
func (pd *PD) Device() *Device { return pd.dev }

// MR is a registered memory region over a Go byte slice. Remote peers name it
// by its RKey and a virtual address within [VA, VA+len); local work requests
// by its LKey.
//
// Deregistration is safe while the region is in use: every access holds the
// region's read lock for the duration of one copy and checks that it is
// still valid, and Deregister takes the write lock, so it waits for copies in
// progress and every later access fails with an access error.
type MR struct {
	pd     *PD
	buf    []byte
	va     uint64
	lkey   uint32
	rkey   uint32
	mrn    uint32 // the region's number on its device (rdma res show mr)
	access Access

	mu    sync.RWMutex
	valid bool
}

// LKey returns the local key.
func (mr *MR) LKey() uint32 { return mr.lkey }

// RKey returns the remote key.
func (mr *MR) RKey() uint32 { return mr.rkey }

// VA returns the virtual address of the region's first byte.
func (mr *MR) VA() uint64 { return mr.va }

// Len returns the region's length in bytes.
func (mr *MR) Len() int { return len(mr.buf) }

// Access returns the region's access rights.
func (mr *MR) Access() Access { return mr.access }

// PD returns the region's protection domain.
func (mr *MR) PD() *PD { return mr.pd }

// Bytes returns the registered memory.
func (mr *MR) Bytes() []byte { return mr.buf }

// Errors of memory checks. The responder maps them to NAK codes, the
// requester to completion statuses.
var (
	ErrBadKey    = errors.New("device: no valid memory region with that key")
	ErrWrongPD   = errors.New("device: memory region belongs to another protection domain")
	ErrNoAccess  = errors.New("device: memory region lacks the access right")
	ErrOutOfMR   = errors.New("device: access outside the memory region")
	ErrMisalign  = errors.New("device: atomic target is not 8-byte aligned")
	ErrMRInvalid = errors.New("device: memory region was deregistered or invalidated")
)

// RegisterMR registers buf in pd with the given rights; its virtual address
// is the address of buf[0], as verbs applications expect.
func (pd *PD) RegisterMR(buf []byte, access Access) (*MR, error) {
	var va uint64
	if len(buf) > 0 {
		va = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(buf))))
	}
	return pd.RegisterMRAt(buf, va, access)
}

// RegisterMRAt registers buf in pd at virtual address va (an IOVA of the
// caller's choosing).
func (pd *PD) RegisterMRAt(buf []byte, va uint64, access Access) (*MR, error) {
	if access&(AccessRemoteWrite|AccessRemoteAtomic) != 0 && access&AccessLocalWrite == 0 {
		// IBTA 10.6.3.1: remote write or atomic needs local write.
		return nil, fmt.Errorf("device: register MR: %v needs LOCAL_WRITE too", access)
	}
	if va+uint64(len(buf)) < va {
		return nil, fmt.Errorf("device: register MR: va %#x + %d bytes wraps around", va, len(buf))
	}
	mr := &MR{pd: pd, buf: buf, va: va, access: access, valid: true}
	if err := pd.dev.mrs.insert(mr); err != nil {
		return nil, err
	}
	return mr, nil
}

// Deregister invalidates the region, after any access in progress ends.
func (mr *MR) Deregister() error {
	mr.mu.Lock()
	was := mr.valid
	mr.valid = false
	mr.mu.Unlock()
	if !was {
		return fmt.Errorf("device: deregister MR lkey %#x: already deregistered", mr.lkey)
	}
	mr.pd.dev.mrs.remove(mr)
	return nil
}

// Invalidate marks the region invalid (LOCAL_INV, SEND_WITH_INV) without
// releasing its keys.
func (mr *MR) Invalidate() {
	mr.mu.Lock()
	mr.valid = false
	mr.mu.Unlock()
}

// Valid reports whether the region may be accessed.
func (mr *MR) Valid() bool {
	mr.mu.RLock()
	defer mr.mu.RUnlock()
	return mr.valid
}

// check validates an access of n bytes at va with the given rights from pd.
func (mr *MR) check(pd *PD, va uint64, n int, need Access) (off int, err error) {
	if pd != nil && mr.pd != pd {
		return 0, ErrWrongPD
	}
	if mr.access&need != need {
		return 0, ErrNoAccess
	}
	if va < mr.va || n < 0 || va-mr.va > uint64(len(mr.buf)) || uint64(n) > uint64(len(mr.buf))-(va-mr.va) {
		return 0, ErrOutOfMR
	}
	return int(va - mr.va), nil
}

// CopyTo copies src into the region at va, checking pd and rights under the
// region's lock. need is the right the access requires (AccessRemoteWrite
// for an inbound RDMA WRITE, AccessLocalWrite for a receive or READ response).
func (mr *MR) CopyTo(pd *PD, va uint64, src []byte, need Access) error {
	mr.mu.RLock()
	defer mr.mu.RUnlock()
	if !mr.valid {
		return ErrMRInvalid
	}
	off, err := mr.check(pd, va, len(src), need)
	if err != nil {
		return err
	}
	copy(mr.buf[off:], src)
	return nil
}

// CopyFrom copies len(dst) bytes at va out of the region.
func (mr *MR) CopyFrom(pd *PD, va uint64, dst []byte, need Access) error {
	mr.mu.RLock()
	defer mr.mu.RUnlock()
	if !mr.valid {
		return ErrMRInvalid
	}
	off, err := mr.check(pd, va, len(dst), need)
	if err != nil {
		return err
	}
	copy(dst, mr.buf[off:])
	return nil
}

// ReadSync copies len(dst) bytes at va out of the region for its owner,
// ordered after every access the device completed before: it takes the
// region's lock exclusively, where the device's own accesses share it. It
// is for an application that polls memory a peer writes with RDMA WRITE
// (perftest's write_lat waits for the last byte of a message so): a plain
// read of the buffer would race with the receive path.
func (mr *MR) ReadSync(va uint64, dst []byte) error {
	mr.mu.Lock()
	defer mr.mu.Unlock()
	if !mr.valid {
		return ErrMRInvalid
	}
	off, err := mr.check(nil, va, len(dst), 0)
	if err != nil {
		return err
	}
	copy(dst, mr.buf[off:])
	return nil
}

// WriteSync copies src into the region at va for its owner, under the
// region's lock taken exclusively: ordered with every access of the device
// (a retransmission gathering a message from it, say), which a plain write
// of the buffer would race with.
func (mr *MR) WriteSync(va uint64, src []byte) error {
	mr.mu.Lock()
	defer mr.mu.Unlock()
	if !mr.valid {
		return ErrMRInvalid
	}
	off, err := mr.check(nil, va, len(src), 0)
	if err != nil {
		return err
	}
	copy(mr.buf[off:], src)
	return nil
}

// Atomic runs op on the 64-bit word at va, read and written in host byte
// order as verbs atomics are, and returns the word's original value. All atomics of a device are serialized (as rxe does)
// so that a CmpSwap and a FetchAdd on the same word never interleave.
func (mr *MR) Atomic(pd *PD, va uint64, op func(orig uint64) uint64) (uint64, error) {
	if va%8 != 0 {
		return 0, ErrMisalign
	}
	mr.mu.RLock()
	defer mr.mu.RUnlock()
	if !mr.valid {
		return 0, ErrMRInvalid
	}
	off, err := mr.check(pd, va, 8, AccessRemoteAtomic)
	if err != nil {
		return 0, err
	}
	dev := mr.pd.dev
	dev.atomicMu.Lock()
	orig := binary.NativeEndian.Uint64(mr.buf[off:])
	binary.NativeEndian.PutUint64(mr.buf[off:], op(orig))
	dev.atomicMu.Unlock()
	return orig, nil
}

// mrTable maps keys to regions. Keys are random 32-bit values (never 0), so
// a peer cannot guess one from another; lkey and rkey differ.
type mrTable struct {
	mu   sync.RWMutex
	keys map[uint32]*MR
	seq  uint32 // the last region number given
}

func (t *mrTable) insert(mr *MR) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.keys == nil {
		t.keys = map[uint32]*MR{}
	}
	if len(t.keys) >= 2*MaxMR {
		return fmt.Errorf("device: register MR: limit of %d regions reached", MaxMR)
	}
	t.seq++
	mr.mrn = t.seq
	mr.lkey = t.freshKey()
	t.keys[mr.lkey] = mr
	mr.rkey = t.freshKey()
	t.keys[mr.rkey] = mr
	return nil
}

func (t *mrTable) freshKey() uint32 {
	var b [4]byte
	for {
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
		k := binary.LittleEndian.Uint32(b[:])
		if _, taken := t.keys[k]; k != 0 && !taken {
			return k
		}
	}
}

func (t *mrTable) remove(mr *MR) {
	t.mu.Lock()
	delete(t.keys, mr.lkey)
	delete(t.keys, mr.rkey)
	t.mu.Unlock()
}

// regions returns the registered regions, each once, in no order.
func (t *mrTable) regions() []*MR {
	t.mu.RLock()
	defer t.mu.RUnlock()
	mrs := make([]*MR, 0, len(t.keys)/2)
	for k, mr := range t.keys {
		if k == mr.lkey {
			mrs = append(mrs, mr)
		}
	}
	return mrs
}

// lookup returns the region a key names, and whether key is its rkey.
func (t *mrTable) lookup(key uint32) (mr *MR, isRKey bool) {
	t.mu.RLock()
	mr = t.keys[key]
	t.mu.RUnlock()
	if mr == nil {
		return nil, false
	}
	return mr, mr.rkey == key
}
