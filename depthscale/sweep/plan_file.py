"""The workdir's plan: planned and fitted once, frozen in plan.json, read by every worker.

The first worker to write plan.json wins, so every worker and `status` use the same
groups whatever device each runs on.
"""
from __future__ import annotations

import json
import sys

from depthscale.errors import ConfigError
from depthscale.io import workdir as workdir_lib
from depthscale.sweep import plan, probe


def fitted(study, workdir: str, devs) -> list[plan.Group] | None:
  """The groups planned and fitted to these devices' memory (compiling each candidate
  once), or None if the workdir's plan is frozen already. Writes nothing: a group that
  cannot fit is refused (one line) before the workdir is touched."""
  if workdir_lib.read_plan(workdir) is not None:
    return None
  lines: list[str] = []  # said once the fit succeeds: a refusal stays one line
  groups = fit_groups(study, devs, None, log=lines.append)
  for line in lines:
    print(f"depthscale: {line}", file=sys.stderr)
  return groups


def fit_groups(study, devs, share=None, log=lambda line: None) -> list[plan.Group]:
  """The study's groups planned at the rate of `devs` and fitted to the memory of the
  share that trains one (`share`, else plan.share_of(devs, groups)); an adaptive
  design's later rounds are fitted the same way (sweep/design_rounds.py)."""
  groups = plan.make_plan(study, probe.flops_per_s(study, devs))
  groups = probe.fit(study, groups, share or plan.share_of(devs, groups), log=log)
  plan.check_settings_whole(groups, study.config)  # a memory split may part a setting
  return groups


def freeze_plan(study, workdir: str, devs, groups=None) -> list[plan.Group]:
  """The workdir's groups: plan.json if a worker wrote it, else `groups` (or those
  planned and fitted here for these devices) written."""
  if workdir_lib.read_plan(workdir) is None:
    groups = groups if groups is not None else fitted(study, workdir, devs)
    workdir_lib.write_plan_once(workdir, json.dumps(
        dict(format=1, device=devs[0].device_kind, devices=len(devs),
             groups=plan.to_json(groups)), indent=1))
  return load_plan(study, workdir)


def load_plan(study, workdir: str) -> list[plan.Group]:
  """The groups of the workdir's plan.json, or a one-line ConfigError."""
  try:
    return plan.from_json(workdir_lib.read_plan(workdir)["groups"], list(study.cells))
  except (ValueError, KeyError, TypeError) as e:
    raise ConfigError(f"{workdir}/plan.json does not match the study ({e}); "
                      "use a new --workdir") from None
