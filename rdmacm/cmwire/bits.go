package cmwire

// field locates a value in a CM message as IBTA's tables do: off is the
// byte offset in the message data (after the MAD header), bit the offset
// of its most significant bit from the most significant bit of that byte,
// width the number of bits (at most 32; GIDs, GUIDs and private data have
// their own accessors).
type field struct{ off, bit, width uint8 }

// span returns the bytes f covers and how far its lowest bit is from the
// end of the last byte.
func (f field) span() (start, end int, shift uint) {
	start = HeaderLen + int(f.off)
	bits := int(f.bit) + int(f.width)
	end = start + (bits+7)/8
	return start, end, uint((end-start)*8 - bits)
}

func (f field) get(m MAD) uint32 {
	start, end, shift := f.span()
	var v uint64
	for _, c := range m[start:end] {
		v = v<<8 | uint64(c)
	}
	return uint32(v>>shift) & (1<<f.width - 1)
}

func (f field) set(m MAD, val uint32) {
	start, end, shift := f.span()
	var v uint64
	for _, c := range m[start:end] {
		v = v<<8 | uint64(c)
	}
	mask := uint64(1<<f.width-1) << shift
	v = v&^mask | uint64(val)<<shift&mask
	for i := end - 1; i >= start; i-- {
		m[i] = byte(v)
		v >>= 8
	}
}

func (f field) flag(m MAD) bool { return f.get(m) != 0 }

func (f field) setFlag(m MAD, on bool) {
	var v uint32
	if on {
		v = 1
	}
	f.set(m, v)
}

func get64(m MAD, off int) uint64 {
	b := m[HeaderLen+off:]
	return uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 |
		uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
}

func put64(m MAD, off int, v uint64) {
	b := m[HeaderLen+off:]
	for i := 7; i >= 0; i-- {
		b[i] = byte(v)
		v >>= 8
	}
}

func getGID(m MAD, off int) (g GID) {
	copy(g[:], m[HeaderLen+off:])
	return g
}

func putGID(m MAD, off int, g GID) { copy(m[HeaderLen+off:], g[:]) }

// area returns the n bytes at off: private data, ARI, additional
// information. A view into m.
func area(m MAD, off, n int) []byte {
	s := HeaderLen + off
	return m[s : s+n : s+n]
}

// putArea copies b into the n bytes at off, zero-filling the rest; it
// reports whether b fits.
func putArea(m MAD, off, n int, b []byte) bool {
	if len(b) > n {
		return false
	}
	a := area(m, off, n)
	copy(a, b)
	clear(a[len(b):])
	return true
}
