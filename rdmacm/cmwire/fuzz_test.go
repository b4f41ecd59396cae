package cmwire

import (
	"reflect"
	"testing"
)

// encodeAny encodes a value Decode returned.
func encodeAny(t *testing.T, v any, out MAD) {
	switch r := v.(type) {
	case REQ:
		r.Encode(out)
	case MRA:
		r.Encode(out)
	case REJ:
		r.Encode(out)
	case REP:
		r.Encode(out)
	case RTU:
		r.Encode(out)
	case DREQ:
		r.Encode(out)
	case DREP:
		r.Encode(out)
	case SIDRReq:
		r.Encode(out)
	case SIDRRep:
		r.Encode(out)
	case LAP:
		r.Encode(out)
	case APR:
		r.Encode(out)
	case ClassPortInfo:
		r.Encode(out)
	default:
		t.Fatalf("Decode returned %T", v)
	}
}

// FuzzDecode feeds arbitrary bytes through what a receiver does with a UD
// payload to QP 1: ParseMAD, Check, Decode and, for a REQ or SIDR_REQ,
// the rdma_cm header of its private data. Nothing may panic, and a MAD
// that decodes re-encodes to bytes that decode the same.
func FuzzDecode(f *testing.F) {
	f.Add(make([]byte, MADLen))
	f.Add(make([]byte, 10))
	seed := NewCM(make([]byte, MADLen), AttrREQ, 2, 0)
	f.Add([]byte(seed))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseMAD(data)
		if err != nil {
			return
		}
		h := m.Header()
		Check(&h)
		v := Decode(m)
		switch r := v.(type) {
		case REQ:
			_, _ = ParseCMAHeader(r.PrivateData)
		case SIDRReq:
			_, _ = ParseCMAHeader(r.PrivateData)
		case REJ:
			_ = r.ARIBytes()
		}
		if v == nil {
			return
		}
		out := NewCM(make([]byte, MADLen), h.AttrID, h.TID, h.AttrMod)
		encodeAny(t, v, out)
		if again := Decode(out); !reflect.DeepEqual(again, v) {
			t.Fatalf("%v: re-encoded %+v, decoded %+v", h.AttrID, v, again)
		}
	})
}
