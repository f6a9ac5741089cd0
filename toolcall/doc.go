// Package toolcall holds the data a tool call is carried in between
// rollcage's layers: the call as the policy made it (Call) and what the
// monitor's normalizer makes of it (Normalized, with its Commands and
// GitOps). It imports nothing of ours, so both monitor, which produces
// these values, and rules, whose gates read them typed before the Rego
// policy sees them as input.call and input.normalized, can depend on it.
//
// The JSON of these types is the wire format of the gateway API, the
// trajectory files and the rules' input alike.
package toolcall
