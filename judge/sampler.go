package judge

import (
	"encoding/binary"
	"hash/fnv"
)

// Sampler picks unflagged calls for audit by the judge, so the judge also
// sees what the rules miss. The choice is a pure function of Seed and the
// call's id: a rerun of the same run audits the same calls. The zero
// value audits nothing.
type Sampler struct {
	Rate float64 // fraction of unflagged calls audited, in [0, 1]
	Seed uint64
}

// Sample reports whether the call with this id (e.g. episode id + request
// id) is audited.
func (s Sampler) Sample(callID string) bool {
	if s.Rate <= 0 {
		return false
	}
	if s.Rate >= 1 {
		return true
	}
	h := fnv.New64a()
	var seed [8]byte
	binary.LittleEndian.PutUint64(seed[:], s.Seed)
	h.Write(seed[:])
	h.Write([]byte(callID))
	// FNV's low bits mix poorly for short inputs; finalize like splitmix64.
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11)/(1<<53) < s.Rate
}
