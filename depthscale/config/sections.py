"""A study config as its sections: `defaults` puts together every section's fields, and
`validate` runs every section's checks, in an order that keeps the first error a config
with several reports the same, before anything compiles."""
from __future__ import annotations

import ml_collections

from depthscale.config import design, evaluation, grid, model, plan, report, run, train
from depthscale.config.fields import field

SECTIONS = (grid, model, train, evaluation, plan, run, report, design)  # each with its add(c)


def defaults() -> ml_collections.ConfigDict:
  """Every field a study may set, with sensible defaults (each field's one declaration,
  its default and meaning: its section's add, listed in docs/config.md)."""
  c = ml_collections.ConfigDict()
  field(c, "name", "study", "the study's name, shown by `plan`, `status` and its W&B runs")
  for section in SECTIONS:  # config.json's order
    section.add(c)
  return c


def validate(c: ml_collections.ConfigDict):
  """Check every field a user sets; returns the task. One-line ConfigError otherwise."""
  task = grid.make_task(c)
  widths, lengths = grid.check(c)
  grid.check_lengths(task, lengths)  # the task's contract, before any check that uses it
  model.check(c, widths)
  train.check_batch(c)
  evaluation.check_size(c)
  k = train.check_steps(c)
  run.check_checkpoint_every(c, k)
  train.check(c, task, k)
  run.check_lease(c)
  evaluation.check_threshold(c)
  train.check_advance_at(c)
  plan.check(c)
  run.check_wandb(c)
  report.check(c)
  design.check(c)
  return task
