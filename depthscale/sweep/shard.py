"""One SLURM array task (a submitit Checkpointable): train shard `index` of `count`.

Lives in the package, not in launch/, so that submitit can unpickle it in the job.
On timeout or preemption submitit requeues it as is; the runner resumes from checkpoints.
"""
from __future__ import annotations

import submitit

from depthscale import config as config_lib


class Shard(submitit.helpers.Checkpointable):
  def __init__(self, spec: str, overrides: list[str], workdir: str, index: int, count: int):
    self.spec, self.overrides, self.workdir = spec, overrides, workdir
    self.index, self.count = index, count

  def __call__(self) -> int:
    from depthscale.sweep import runner
    c = config_lib.load(self.spec, self.overrides)
    rows = runner.run(c, self.workdir, progress=False, worker=(self.index, self.count),
                      signals=False)
    return len(rows)
