"""The report section: what the report checks against the study's paper (claims,
companion studies, the paper's table) and the paper's fit, with their checks. The valid
claim kinds are report/claims.py's."""
from __future__ import annotations

import os

import ml_collections

from depthscale.config.base import ConfigError
from depthscale.config.fields import field, section


def add(c: ml_collections.ConfigDict) -> None:
  cd = ml_collections.ConfigDict
  field(c, "paper_fit", cd(), "the paper's fit the report sets beside the study's: {kind: "
        "depth or width, slope, intercept, r2, source, note}")
  section(c, "report", "what the report checks against the study's paper")
  field(c, "report.claims", [], "the paper's claims checked: a list of {'kind', 'claim', "
        "'paper', ...}, kinds in report/claims.py")
  field(c, "report.companions", cd(), "companion studies, {name: 'study.py:args'}, run "
        "after the study into WORKDIR/<name> and set beside it")
  field(c, "report.paper_table", cd(), "the paper's table: {depth: the published numbers}")
  field(c, "report.scaled_by", "", "the task's measure, set by `study.resolve` and read by "
        "the report")


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
