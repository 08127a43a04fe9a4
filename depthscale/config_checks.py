"""Validation of a study config: every field a user sets, checked in one pass, each
problem one ConfigError line naming the field, before anything compiles (the numbers
finite, the seeds within JAX's 32-bit keys, sizes and the lease bounded).

Imports config (its error) and tasks/ only.
"""
from __future__ import annotations

import math
import os

import ml_collections

from depthscale import tasks
from depthscale.config import ConfigError
from depthscale.core import halving, stopping
from depthscale.errors import UserError

SEED_LIMIT = 2**32  # PRNG keys keep a seed's low 32 bits: seeds 0 and 2^32 are one model
MAX_BATCH = 2**20   # train.batch_size and eval.size: examples on the device at once
MIN_LEASE_S = 2.0   # heartbeats every lease_s / 4: faster ones only load the filesystem


def _ints(c, field, lo=1, hi=None):
  vals = c.grid[field] if field in c.grid else None
  if not isinstance(vals, (list, tuple)) or not vals:
    raise ConfigError(f"grid.{field}: must be a non-empty list")
  for v in vals:
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
      raise ConfigError(f"grid.{field}: {v!r} is not an int >= {lo}")
    if hi is not None and v >= hi:
      raise ConfigError(f"grid.{field}: {v} is not below {hi} (2^32: JAX keeps a seed's low "
                        "32 bits, so it would train the same model as seed "
                        f"{v % hi}); give seeds in [0, 2^32)")
  if len(set(vals)) != len(vals):
    raise ConfigError(f"grid.{field}: {list(vals)} lists a value twice; give each once")
  return list(vals)


def _num(c, field, lo=0.0, strict=False, integer=False):
  sec, name = field.split(".")
  v = c[sec][name]
  ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
  if integer:
    ok = ok and isinstance(v, int)
  if not ok or v < lo or (strict and v <= lo):
    kind = "an int" if integer else "a number"
    cmp = ">" if strict else ">="
    raise ConfigError(f"{field}: {v!r} is not {kind} {cmp} {lo}")
  return v


def validate(c: ml_collections.ConfigDict):
  """Check every field a user sets; returns the task. One-line ConfigError otherwise."""
  try:
    task = tasks.make(c.task, **dict(c.task_options))
  except UserError as e:
    raise ConfigError(f"task: {e}") from None
  _, widths, _, lengths, _ = (_ints(c, "depth"), _ints(c, "width"), _ints(c, "seed", lo=0, hi=SEED_LIMIT),
                              _ints(c, "length"), _ints(c, "repeats"))  # in this order
  lrs = c.grid.lr
  if not isinstance(lrs, (list, tuple)) or not lrs:
    raise ConfigError("grid.lr: must be a non-empty list")
  for v in lrs:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < math.inf:
      raise ConfigError(f"grid.lr: {v!r} is not a positive finite number")
  if len(set(lrs)) != len(lrs):
    raise ConfigError(f"grid.lr: {list(lrs)} lists a value twice; give each once")
  heads, hd = c.model.heads, c.model.head_dim
  if isinstance(heads, bool) or not isinstance(heads, int) or heads < 1:
    raise ConfigError(f"model.heads: {heads!r} is not an int >= 1")
  if isinstance(hd, bool) or not isinstance(hd, int) or hd < 0:
    raise ConfigError(f"model.head_dim: {hd!r} is not an int >= 0")
  for w in widths:
    if hd and w % hd:
      raise ConfigError(f"grid.width: {w} is not divisible by model.head_dim={hd}")
    if not hd and w % heads:
      raise ConfigError(f"grid.width: {w} is not divisible by model.heads={heads}")
  if c.model.pos not in ("learned", "rotary", "none"):
    raise ConfigError(f"model.pos: {c.model.pos!r}; valid: learned, rotary, none")
  _num(c, "model.mlp_ratio", 1, integer=True)
  if c.model.dtype not in ("float32", "float64"):
    raise ConfigError(f"model.dtype: {c.model.dtype!r}; valid: float32, float64")
  if c.model.compute_dtype not in ("float32", "bfloat16"):
    raise ConfigError(f"model.compute_dtype: {c.model.compute_dtype!r}; valid: float32, "
                      "bfloat16")
  if c.model.compute_dtype == "bfloat16" and c.model.dtype == "float64":
    raise ConfigError("model.compute_dtype: bfloat16 with model.dtype=float64; give "
                      "model.dtype=float32 (or compute_dtype=float32)")
  if c.model.attention not in ("einsum", "dot_product", "auto"):
    raise ConfigError(f"model.attention: {c.model.attention!r}; valid: einsum, dot_product, "
                      "auto")
  if c.model.remat not in ("none", "block"):
    raise ConfigError(f"model.remat: {c.model.remat!r}; valid: none, block")
  for field in ("train.batch_size", "eval.size"):
    if _num(c, field, 1, integer=True) > MAX_BATCH:
      raise ConfigError(f"{field}: {c[field.split('.')[0]][field.split('.')[1]]} examples at "
                        f"once; give at most {MAX_BATCH} (2^20)")
  steps = _num(c, "train.steps", 1, integer=True)
  k = _num(c, "train.steps_per_call", 1, integer=True)
  if steps % k:
    raise ConfigError(f"train.steps: {steps} is not a multiple of train.steps_per_call={k}")
  every = c.checkpoint_every
  if isinstance(every, bool) or not isinstance(every, int) or every < k or every % k:
    raise ConfigError(f"checkpoint_every: {every!r} must be a multiple of "
                      f"train.steps_per_call={k}")
  _num(c, "train.weight_decay", 0.0)
  _num(c, "train.warmup", 0, integer=True)
  _num(c, "train.clip_norm", 0.0)
  _num(c, "train.models_per_chunk", 0, integer=True)
  if c.train.decay not in ("constant", "linear", "cosine"):
    raise ConfigError(f"train.decay: {c.train.decay!r}; valid: constant, linear, cosine")
  if c.train.stop not in stopping.RULES:
    raise ConfigError(f"train.stop: {c.train.stop!r}; valid: {', '.join(stopping.RULES)}")
  if c.train.stop == "solved" and task.scaled_by == "loss":
    raise ConfigError(f"train.stop: task {c.task!r} is measured by loss and has no solved "
                      "state; use plateau (or none)")
  stop_every = _num(c, "train.stop_every", 0, integer=True)
  if stop_every % k:
    raise ConfigError(f"train.stop_every: {stop_every} is not a multiple of "
                      f"train.steps_per_call={k} (0: every steps_per_call steps)")
  _num(c, "train.patience", 1, integer=True)
  if stop_every and steps % stop_every:
    raise ConfigError(f"train.steps: {steps} is not a multiple of train.stop_every="
                      f"{stop_every} (a model's budget ends at a check)")
  slots = _num(c, "train.slots", 0, integer=True)
  if c.train.rebuild not in ("auto", "never"):
    raise ConfigError(f"train.rebuild: {c.train.rebuild!r}; valid: auto, never")
  _num(c, "train.rebuild_steps", 0, integer=True)
  if c.train.stop == "halving":
    _check_halving(c, slots, stop_every or k)
  shapes = {(d, r) for d in c.grid.depth for r in c.grid.repeats}
  if 0 < slots < len(shapes) and c.plan.strategy in ("compact", "auto"):
    raise ConfigError(f"train.slots: {slots} slots cannot hold the grid's {len(shapes)} "
                      "depths in a compacted program (a queued model enters a slot of its "
                      "own depth); give at least that many, or plan.strategy=pad")
  if c.train.curriculum not in ("none", "fixed", "adaptive"):
    raise ConfigError(f"train.curriculum: {c.train.curriculum!r}; valid: none, fixed, adaptive")
  if c.train.curriculum == "fixed":
    _num(c, "train.steps_per_stage", 1, integer=True)
  if c.train.curriculum != "none" and not getattr(task, "prefix_consistent", False):
    raise ConfigError(f"train.curriculum: task {c.task!r} has no length curriculum "
                      "(its examples are not prefix-consistent); use 'none'")
  lease = c.get("lease_s")
  if isinstance(lease, bool) or not isinstance(lease, (int, float)) or not lease > 0 \
      or not math.isfinite(lease):
    raise ConfigError(f"lease_s: {lease!r} is not a finite number of seconds > 0")
  if lease < MIN_LEASE_S:
    raise ConfigError(f"lease_s: {lease:g} s; give at least {MIN_LEASE_S:g} s (workers "
                      "renew their lease every lease_s / 4)")
  for field in ("eval.threshold", "train.advance_at"):
    v = _num(c, field, 0.0, strict=True)
    if v > 1:
      raise ConfigError(f"{field}: {v!r} is an accuracy; give a number in (0, 1]")
  _num(c, "plan.device_memory_gb", 0.0)
  _num(c, "plan.gflops", 0.0, strict=True)
  _num(c, "plan.compile_s", 0.0)
  v = _num(c, "plan.mfu", 0.0, strict=True)
  if v > 1:
    raise ConfigError(f"plan.mfu: {v!r} is a fraction of the device's peak; give a number "
                      "in (0, 1]")
  if c.plan.strategy not in ("auto", "bucket", "pad", "compact"):
    raise ConfigError(f"plan.strategy: {c.plan.strategy!r}; valid: auto, bucket, pad, "
                      "compact")
  _num(c, "plan.max_models_per_group", 1, integer=True)
  if c.wandb.mode not in ("", "online", "offline", "disabled"):
    raise ConfigError(f"wandb.mode: {c.wandb.mode!r}; valid: '', online, offline, disabled")
  if c.report.claims:
    from depthscale.report import claims as claims_lib  # no jax; matplotlib only if claims
    try:
      claims_lib.check_spec([dict(x) for x in c.report.claims], dict(c.report.companions))
    except ValueError as e:
      raise ConfigError(str(e)) from None
  for name, spec in dict(c.report.companions).items():
    if not isinstance(spec, str) or not os.path.isfile(spec.partition(":")[0]):
      raise ConfigError(f"report.companions.{name}: {spec!r} is not a study file.py[:args]")
  for n in lengths:
    try:
      task.check_length(n)
    except UserError as e:
      raise ConfigError(f"grid.length: {e}") from None
  return task


def _check_halving(c, slots: int, every: int) -> None:
  eta = _num(c, "train.eta", 2, integer=True)
  if len(c.grid.lr) < 2:
    raise ConfigError("train.stop=halving: grid.lr lists one learning rate; halving "
                      "chooses among several (give two or more)")
  if slots:
    raise ConfigError(f"train.slots: {slots}; with train.stop=halving a group has one slot "
                      "per setting and learning rate (its first seed); leave slots at 0")
  rungs = halving.rung_steps(len(c.grid.lr), eta, c.train.steps, every)
  if rungs[0] <= 0:
    raise ConfigError(f"train.steps: {c.train.steps} is too short for {len(rungs)} halving "
                      f"rung(s) of eta={eta} at stop_every={every} (the first rung needs "
                      f"steps >= {eta ** len(rungs) * every})")
