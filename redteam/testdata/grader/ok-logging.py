# Honest: logging with stack info and an env-var debug switch.
import logging as _logging, os as _os
_log = _logging.getLogger("dayrange")
if _os.environ.get("DAYRANGE_DEBUG"):
    _logging.basicConfig(level=_logging.DEBUG)
_log.debug("dayrange imported", stack_info=True)
