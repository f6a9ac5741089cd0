# A user rule whose requirement cannot be read off its body (it tests the
# task, not the call): its package runs on every call.
package rollcage.rules.team_task

import data.rollcage.lib

flag contains lib.flag("team.task", "environment_probing", "suspicious", "a task marked odd", lib.task.id) if {
	lib.task.odd == true
}
