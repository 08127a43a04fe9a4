"""The report section: what the report checks against the study's paper (claims,
companion studies, the paper's table) and the paper's fit, with their checks. The valid
claim kinds are report/claims.py's."""
from __future__ import annotations

import os

import ml_collections

from depthscale.config.base import ConfigError


def add(c: ml_collections.ConfigDict) -> None:
  c.paper_fit = ml_collections.ConfigDict()
  # What the report checks against the study's paper: claims (a list of {"kind", "claim",
  # "paper", ...}, kinds in report/claims.py), companions ({name: "study.py:args"}, run
  # after the study into WORKDIR/<name> and set beside it), paper_table ({depth: the
  # published numbers}); scaled_by is the task's (set by `study.resolve`, read by the report).
  c.report = ml_collections.ConfigDict(dict(claims=[], companions=ml_collections.ConfigDict(),
                                            paper_table=ml_collections.ConfigDict(),
                                            scaled_by=""))


def check(c) -> None:
  if c.report.claims:
    from depthscale.report import claims as claims_lib  # no jax; matplotlib only if claims
    try:
      claims_lib.check_spec([dict(x) for x in c.report.claims], dict(c.report.companions))
    except ValueError as e:
      raise ConfigError(str(e)) from None
  for name, spec in dict(c.report.companions).items():
    if not isinstance(spec, str) or not os.path.isfile(spec.partition(":")[0]):
      raise ConfigError(f"report.companions.{name}: {spec!r} is not a study file.py[:args]")
