// Package jsondec decodes JSON with go-json-experiment's faster decoder
// in encoding/json's semantics, and falls back to encoding/json itself on
// what the fast decoder rejects, so a rejected input keeps exactly the
// partial value and error encoding/json gives it.
//
// Its scanner (Object, Array, String, Skip) walks JSON in place for a
// caller that decodes a known shape by hand, skipping what it does not
// need at a fraction of a decoder's cost; it reads only what
// encoding/json accepts and leaves anything it is unsure of to the
// caller's ordinary decoding.
package jsondec
