package judge

// Sampler picks unflagged calls for audit by the judge, so the judge also
// sees what the rules miss. The choice is a pure function of Seed and the
// call's id: a rerun of the same run audits the same calls. The zero
// value audits nothing.
type Sampler struct {
	Rate float64 // fraction of unflagged calls audited, in [0, 1]
	Seed uint64
}

// Sample reports whether the call with this id (e.g. episode id + request
// id) is audited. It allocates nothing: the monitor asks for every
// unflagged call.
func (s Sampler) Sample(callID string) bool {
	if s.Rate <= 0 {
		return false
	}
	if s.Rate >= 1 {
		return true
	}
	// FNV-1a over the seed and the id, then splitmix64's finalizer, since
	// FNV's high bits mix poorly for short, similar ids.
	const prime = 1099511628211
	x := uint64(14695981039346656037)
	for i := range 8 {
		x = (x ^ (s.Seed >> (8 * i) & 0xff)) * prime
	}
	for i := 0; i < len(callID); i++ {
		x = (x ^ uint64(callID[i])) * prime
	}
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11)/(1<<53) < s.Rate
}
