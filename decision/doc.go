// Package decision holds what the monitor made of one tool call, as the
// layers above it carry it: the decision (allow, block, rewrite) with
// the rules' flags and the judge's verdict, and the call's CallResult, what
// the policy is shown and what the call did. The monitor produces these
// values; the harness records them and the gateway answers with them,
// so the gateway needs this package and not the monitor.
//
// The JSON of these types is the wire format of the gateway API and the
// trajectory files.
package decision
