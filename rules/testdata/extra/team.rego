# A user policy package, as a team would add with --rules DIR.
package rollcage.rules.team_policy

import data.rollcage.lib

flag contains lib.flag("team.make", "environment_probing", "suspicious", "runs make", c.name) if {
	some c in lib.commands
	c.name == "make"
}
