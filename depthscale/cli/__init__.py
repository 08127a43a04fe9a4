"""The `depthscale` command line (entry point `depthscale.cli:main`): app.py holds the
parser and exit codes, sweep.py the sweep's commands, common.py what launch/slurm.py
shares. Nothing in the library imports this package."""
import os
import signal
import sys
import threading


def _interrupted_while_starting(_signum, _frame):
  sys.stderr.write("depthscale: interrupted while starting (nothing was run)\n")
  os._exit(130)  # not Python's exit: an import cut short can crash it


# Ctrl-C while the modules load (seconds: jax, flax) ends with one line, not a traceback
# through the imports; main() handles it from then on.
_STARTING = (threading.current_thread() is threading.main_thread()
             and signal.getsignal(signal.SIGINT) is signal.default_int_handler)
if _STARTING:
  signal.signal(signal.SIGINT, _interrupted_while_starting)
try:
  from depthscale.cli.app import main  # noqa: F401,E402
finally:
  if _STARTING:
    signal.signal(signal.SIGINT, signal.default_int_handler)
