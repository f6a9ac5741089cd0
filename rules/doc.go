// Package rules is rollcage's first line of the online anti-cheating
// monitor: a Rego (OPA v1) policy engine that looks at one normalized tool
// call, in the context of its task, its sandbox and the episode's recent
// history, and returns Flags.
//
// A flag is not a verdict. Suspicious flags send the call to the LLM judge;
// certain flags mark things no honest solution does (a hidden test read, a
// future commit shown). Rules are tuned for recall: a false positive costs a
// judge call, a miss costs a poisoned training sample.
//
// The default bundle lives in policy/ and is embedded. Every package
// rollcage.rules.<name> that defines a partial set `flag` (and, for the
// egress proxy, `network_flag`) is collected by data.rollcage.flags, so a
// user adds rules by dropping a .rego file with its own package into a
// Config.PolicyDirs directory, written as the default bundle's are. The
// engine compiles once; episode facts are evaluated once per task and
// sandbox; per call, package gate says which rules the call can trigger,
// from the gates the rules declare in their METADATA (custom.gate), and
// only those are evaluated: most calls of an honest episode cost no
// evaluation at all. TestGatesSound and monitor.TestPrefilterEquivalence
// hold the result equal to evaluating every rule.
package rules
