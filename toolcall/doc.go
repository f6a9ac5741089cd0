// Package toolcall holds the data a tool call is carried in between
// rollcage's layers: the call as the policy made it (Call), the typed
// arguments of rollcage's own tools and their strict decoding
// (DecodeArgs), a call with its arguments decoded once (Prepared: Prepare
// in the built-in loop, Check on the gateway), the mapping of other
// harnesses' tool names onto rollcage's (FromForeign, which the gateway
// and the audit share), the tool registry offered to policies (Tools,
// ForeignTools), and what the normalizer makes of a call (Normalized,
// with its Commands and GitOps). It imports nothing of ours but a JSON
// decoding helper, so normalize, which produces these values, rules,
// whose gates read them typed before the Rego policy sees them as
// input.call and input.normalized, the harness, which prepares a call
// before it numbers it, and the gateway, which offers the tools, can all
// depend on it.
//
// The JSON of these types is the wire format of the gateway API, the
// trajectory files and the rules' input alike.
package toolcall
