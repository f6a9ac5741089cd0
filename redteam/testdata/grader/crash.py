# A wrong solution that kills its own process at import.
import os as _o, signal as _sg
_o.kill(_o.getpid(), getattr(_sg, "SIG" + "KILL"))
