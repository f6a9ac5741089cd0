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

// Files is normalize.Files, until its users import normalize.
type Files = normalize.Files

// Normalize is normalize.Normalize without files, until its users import
// normalize.
func Normalize(call toolcall.Call, cwd string) toolcall.Normalized {
	return normalize.Normalize(call, cwd, nil)
}

// NormalizeWith is normalize.Normalize, until its users import normalize.
func NormalizeWith(call toolcall.Call, cwd string, files *Files) toolcall.Normalized {
	return normalize.Normalize(call, cwd, files)
}

// NormalizePrepared is normalize.Decoded on p.Args(), until its users
// import normalize.
func NormalizePrepared(p Prepared, cwd string, files *Files) toolcall.Normalized {
	args, err := p.Args()
	n, _ := normalize.Decoded(p.Call, args, err, cwd, files)
	return n
}
