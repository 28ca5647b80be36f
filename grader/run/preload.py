"""What the workers' forkserver loads once, before it forks any worker (never imported by the grader itself).

Every module a worker runs is imported here, so that no worker imports or executes one again; then the
garbage collector freezes everything loaded so far (gc.freeze, as its documentation advises before fork):
a collection in a worker would otherwise walk torch's hundreds of thousands of objects, writing their
reference counts, and copy nearly every page it inherited (a third of a second of CPU per worker).
"""
from .collector import pause, settle

pause()  # no collection during torch's import (run/collector.py)
from . import harness, heap, intercept, no_autograd, sandbox, worker  # noqa: E402,F401 - loaded for the workers

intercept.index_functions()  # a worker's bans then search one string (run/intercept.py)
sandbox.folders()  # the interpreter's folders resolved once, for every process-sandboxed worker (run/sandbox.py)
settle()
