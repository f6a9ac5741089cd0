package rollcage.rules.team_task_test

import data.rollcage.fixture as fx

# the rule reads the task, whatever the call

test_odd_task if "team.task" in fx.rules(object.union(fx.bash("ls"), {"task": object.union(fx.task, {"odd": true})}))

test_plain_task_benign if not "team.task" in fx.rules(fx.bash("ls"))
