"""One SLURM array task (a submitit Checkpointable): a worker that pulls groups.

Lives in the package, not in launch/, so that submitit can unpickle it in the job.
The runner installs its own SIGTERM/SIGUSR2 handler over submitit's: on a timeout or a
preemption warning it checkpoints the group at the current step, releases its lease,
then calls submitit's handler, which calls `checkpoint()` and requeues the task; the
requeued task resumes from that step.
"""
from __future__ import annotations

import submitit

from depthscale import config as config_lib


class ArrayTask(submitit.helpers.Checkpointable):
  """One task of the array: runs the study's worker on the shared workdir."""

  def __init__(self, spec: str, overrides: list[str], workdir: str):
    self.spec, self.overrides, self.workdir = spec, overrides, workdir

  def __call__(self) -> int:
    from depthscale.sweep import runner, study
    c = config_lib.load(self.spec, self.overrides)
    rows = runner.run(study.resolve(c), self.workdir, progress=False)
    return len(rows)

  def checkpoint(self, *args, **kwargs) -> submitit.helpers.DelayedSubmission:
    """Called by submitit's signal handler after the runner saved the group's state at
    the current step (so there is nothing left to save): requeue this worker as is."""
    return submitit.helpers.DelayedSubmission(self, *args, **kwargs)
