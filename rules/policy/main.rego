# Package rollcage collects the findings of every rule package.
#
# Each package rollcage.rules.<name> contributes a partial set `flag` (for
# tool calls) and optionally `network_flag` (for egress requests seen by the
# proxy). Adding a file with a new package under rollcage.rules is all it
# takes to add rules.
package rollcage

flags contains f if {
	some f in data.rollcage.rules[_].flag
}

network_flags contains f if {
	some f in data.rollcage.rules[_].network_flag
}
