# A user rule without a gate (it tests the task, not the call, so no gate
# on the call would hold): its package runs on every call.
package rollcage.rules.team_task

import data.rollcage.lib

flag contains lib.flag("team.task", "environment_probing", "suspicious", "a task marked odd", lib.task.id) if {
	lib.task.odd == true
}
