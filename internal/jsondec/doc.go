// Package jsondec decodes JSON with go-json-experiment's faster decoder
// in encoding/json's semantics, and falls back to encoding/json itself on
// what the fast decoder rejects, so a rejected input keeps exactly the
// partial value and error encoding/json gives it.
package jsondec
