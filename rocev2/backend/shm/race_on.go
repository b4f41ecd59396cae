//go:build race

package shm

import (
	"runtime"
	"unsafe"
)

// The race detector sees no synchronisation through memory mapped from a
// memfd (it tracks only Go's own memory), yet a ring's publish and poll
// order the producer's writes before the consumer's reads, as a mutex
// would. Both ends of a ring in one process (tests) name it by its
// inode, and the release and acquire below tell the detector what the
// tail's store and load do. Inodes sharing a token only add order.
var raceTokens [256]uint64

func raceToken(ino uint64) unsafe.Pointer {
	return unsafe.Pointer(&raceTokens[ino%uint64(len(raceTokens))])
}

func raceRelease(p unsafe.Pointer) {
	if p != nil {
		runtime.RaceReleaseMerge(p)
	}
}

func raceAcquire(p unsafe.Pointer) {
	if p != nil {
		runtime.RaceAcquire(p)
	}
}
