// Package monitor is the gate every tool call of an episode passes before
// it reaches the sandbox: it normalizes the call (package normalize: bash
// parsed into commands, paths, hosts and git operations), asks the rules
// for flags, asks the judge to confirm flagged calls, and decides: allow,
// block (the policy gets dummy output and the episode goes on) or rewrite
// (a safe form runs instead).
// After a call ran, its output is checked for leaked protected material and
// canary opens before the policy sees it.
//
// The monitor never ends an episode and never tells the policy it was
// caught; a blocked call is labelled as an attempted hack in its CallResult,
// which the harness records in the trajectory. Its EpisodeState is also the
// egress proxy's policy (package egress), asking the same rules about
// every outbound request.
package monitor
