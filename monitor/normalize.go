package monitor

import (
	"github.com/rollcage/rollcage/normalize"
	"github.com/rollcage/rollcage/toolcall"
)

// normalizeArgs is normalize.Decoded, the monitor's one way to normalize
// a call; a test replaces it to see what the monitor makes of the
// normalizer's internal errors.
var normalizeArgs = normalize.Decoded

// normalizeCall normalizes the call on its arguments as decoded once (d),
// following the scripts it runs into the files the policy wrote (files,
// may be nil); internal are the normalizer's internal errors.
func normalizeCall(call toolcall.Call, d decoded, cwd string, files *normalize.Files) (n toolcall.Normalized, internal []string) {
	return normalizeArgs(call, d.args, d.err, cwd, files)
}
