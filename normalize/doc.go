// Package normalize makes a tool call legible to the rules: bash parsed
// (mvdan.cc/sh) into the commands it runs, the paths it reads, writes,
// deletes and lists, the hosts and URLs it contacts, the git operations
// and the packages it names, and file tools' paths and contents, all as a
// toolcall.Normalized.
//
// Normalize is a pure function of the call, its shell's directory and the
// script files the policy wrote earlier (Files): no I/O, no panics (text
// it cannot parse comes back Unparsed, with what a scan of the text
// finds), pinned by golden files under testdata/normalize. The monitor
// runs it on every call before the rules; the offline audit and the rules'
// corpus tooling run it without the monitor.
package normalize
