// Package toolcall holds the data a tool call is carried in between
// rollcage's layers: the call as the policy made it (Call), the typed
// arguments of rollcage's own tools and their strict decoding
// (DecodeArgs), the tool registry offered to policies (Tools,
// ForeignTools), and what the normalizer makes of a call (Normalized,
// with its Commands and GitOps). It imports nothing of ours, so
// normalize, which produces these values, rules, whose gates read them
// typed before the Rego policy sees them as input.call and
// input.normalized, and the gateway, which offers the tools, can all
// depend on it.
//
// The JSON of these types is the wire format of the gateway API, the
// trajectory files and the rules' input alike.
package toolcall
