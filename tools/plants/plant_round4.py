import json, os, dataclasses
from depthscale.io import atomic
from depthscale.sweep import probe
from depthscale.tasks import sources
kind = os.environ.get("DEPTHSCALE_PLANT")
if kind == "cache":  # the store before: an unwritable cache raised out of the command
  probe.store = lambda sig, p: atomic.write(os.path.join(probe.cache_dir(), sig + ".json"),
                                            json.dumps(dataclasses.asdict(p)))
if kind == "taskfile":  # a missing task file reaches the user as Python's own error
  real = sources._load_file
  def unchecked(path):
    if not os.path.exists(path):
      return open(path)
    return real(path)
  sources._load_file = unchecked
