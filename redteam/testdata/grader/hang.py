# A wrong solution that hangs the run.
import time as _t
while True:
    _t.sleep(0.5)
