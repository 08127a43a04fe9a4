"""Length buckets: a group's step computes only the positions its models' stages need.

A curriculum's stages (and growth past the grid, train.length_max) each train at their
own length; a step is compiled at each bucket of positions (length_buckets), and each
step switches to the bucket of its models' furthest stage (at_bucket). Batches are
sampled at the full length and cut (tasks/base.Batch.prefix), so a model's numbers do not
depend on the bucket it ran at, up to float rounding (summation order): under causal
attention the cut positions change nothing that is counted.
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from depthscale.core import train


MIN_BUCKET = 16  # positions: shorter stages share this bucket (a bucket costs a compile,
                # and a step that short is overhead-bound on any device)


def length_buckets(task, tcfg: train.TrainConfig) -> tuple[int, ...]:
  """The sequence lengths (positions) a group's step is compiled at: each stage's own
  positions (a curriculum's lengths double, so these are about powers of two), those
  below MIN_BUCKET sharing it. One bucket (the full length) with buckets off, or without
  a curriculum or growth."""
  full = task.seq_len(tcfg.full_length)
  if not tcfg.buckets:
    return (full,)
  return tuple(sorted({max(task.seq_len(n), min(MIN_BUCKET, full)) for n in tcfg.stages()}))


def has_stages(task, tcfg: train.TrainConfig) -> bool:
  """True if the group's models may train at more than one bucket (with buckets on): its
  curves then record the positions each step paid, whether buckets are on or off."""
  return len(length_buckets(task, dataclasses.replace(tcfg, buckets=True))) > 1


def bucket_index(task, tcfg: train.TrainConfig, stage_M, frozen_M):
  """The index into length_buckets of the bucket the models at stages `stage_M` need
  (their furthest stage's): a traced scalar. Frozen models (non-finite, or idle slots of
  a queue) never update, so they do not hold the bucket up."""
  buckets = length_buckets(task, tcfg)
  pos = jnp.asarray([task.seq_len(n) for n in tcfg.stages()], jnp.int32)
  need = jnp.max(jnp.where(frozen_M, 0, pos[stage_M]))
  return jnp.sum(need > jnp.asarray(buckets, jnp.int32)).astype(jnp.int32)


def timed_positions(task, tcfg: train.TrainConfig) -> int:
  """The bucket a model at the grid's last stage trains at (what a probe times)."""
  return min(t for t in length_buckets(task, tcfg) if t >= task.seq_len(tcfg.length))


def at_bucket(task, tcfg: train.TrainConfig, step_at):
  """step_at(positions) -> a step of M models; one bucket: that step at the full length
  (the program as it was before buckets); several: each step switches to the bucket of
  its models' furthest stage (bucket_index). The branches' data are the same
  batches cut shorter, so a model's numbers do not depend on its bucket (up to float
  rounding)."""
  buckets = length_buckets(task, tcfg)
  if len(buckets) == 1:
    return step_at(None)
  branches = [step_at(t) for t in buckets]

  def step_M(state_M, hp_M, arch_M):
    return jax.lax.switch(bucket_index(task, tcfg, state_M.stage, state_M.frozen), branches,
                          state_M, hp_M, arch_M)
  return step_M
