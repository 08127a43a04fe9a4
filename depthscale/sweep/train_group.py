"""Train one group from loose values (a task, its models, a train config): a blueprint and
run options made here for a GroupRun (sweep/group_run.py). For tests, tools and notebooks;
the workers take both from the Study."""
from __future__ import annotations

from depthscale.core import program, stopping, train
from depthscale.sweep.group_result import CURVES, GroupResult  # noqa: F401 -- re-exported
from depthscale.sweep.group_options import (DISPATCH_S, Hooks, Interrupted,  # noqa: F401
                                            RunOptions, next_dispatch)
from depthscale.sweep.group_run import GroupRun  # noqa: F401


def train_group(task, specs, tcfg: train.TrainConfig, *, steps_per_call: int = 100,
                eval_size: int = 1000, threshold: float = 0.95,
                model_options: dict | None = None, progress: bool = True,
                desc: str = "group", devices=None, checkpoints=None,
                checkpoint_every: int = 0, hooks: Hooks | None = None, probed=None,
                memory_limit: float | None = None,
                stop: stopping.Rule | None = None, slots: int = 0,
                rebuild_steps: int | None = None) -> GroupResult:
  """Train a group to the end (GroupRun.train): `stop` (a core.stopping.Rule) and `slots`
  choose its schedule, `rebuild_steps` (None: never) what a compile costs in its steps."""
  bp = program.Blueprint.of(task, specs, tcfg, model_options, steps_per_call)
  opts = RunOptions(eval_size=eval_size, threshold=threshold,
                    checkpoint_every=checkpoint_every, stop=stop, slots=slots,
                    rebuild_steps=rebuild_steps, memory_limit=memory_limit)
  return GroupRun(bp, opts, devices, checkpoints=checkpoints, hooks=hooks, probed=probed,
                  desc=desc, progress=progress).train()
