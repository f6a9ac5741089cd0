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

// Args are the call's arguments decoded by its tool, as
// normalize.Decoded takes them: typed (a *toolcall.BashArgs for bash,
// ...), or nil when they could not be read or the tool is generic; err
// is what is wrong with them. Arguments the call was built with
// (PrepareArgs, PrepareForeign, PrepareEditor) are not decoded again.
func (p Prepared) Args() (args any, err error) {
	d := p.args
	if d.spec == nil {
		d = decodeCall(p.Call)
	}
	return d.args, d.err
}
