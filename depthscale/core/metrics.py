"""Held-out evaluation of all M models at once: per-position accuracy, n*, losses.

The held-out set is one fixed batch per (task, length), the same for every model.
Written for one model and vmapped over M here.
"""
from __future__ import annotations

import collections

import jax
import jax.numpy as jnp
import numpy as np

from depthscale.core import compiled
from depthscale.core.train import per_token_loss
from depthscale.model import ModelConfig, Transformer

HELD_OUT_SEED = 2**31 - 1
KEEP = 16
_KEPT: collections.OrderedDict = collections.OrderedDict()  # evaluate programs, held-out sets


def _kept(key, make):
  """make(), or what it gave for an equal key earlier in this process (the last KEEP)."""
  return compiled.keep(_KEPT, key, make, KEEP)


def task_id(task) -> str:
  """A task's identity in a process's keys: its class's module and its repr (two users'
  classes may share a name)."""
  return f"{type(task).__module__}.{task!r}"


def float64_on() -> bool:
  """Whether float64 is on here (jax.enable_x64 contexts included)."""
  return jax.dtypes.canonicalize_dtype(np.float64) == np.float64


def evaluator(task, cfg: ModelConfig):
  """make_evaluate(task, cfg), one per (task, cfg) in a process: groups of one padded shape
  (a study's seeds in several groups, a group resumed or rebuilt in the same process)
  evaluate with one compiled program instead of one each."""
  return _kept(("evaluate", task_id(task), cfg), lambda: make_evaluate(task, cfg))


def held_out_set(task, length: int, size: int):
  """held_out(task, length, size), sampled once per process (and float64 setting)."""
  return _kept(("held_out", task_id(task), length, size, float64_on(),
                jax.config.jax_threefry_partitionable),
               lambda: held_out(task, length, size))


def held_out(task, length: int, size: int):
  """The fixed held-out batch of `task` at `length` (never a training key)."""
  return task.sample(jax.random.key(HELD_OUT_SEED), size, length)


def n_star(acc_T, mask_T, threshold: float = 0.95) -> int:
  """Number of leading counted positions whose accuracy is >= threshold."""
  acc = np.asarray(acc_T)[np.asarray(mask_T)]
  below = np.nonzero(acc < threshold)[0]
  return int(below[0]) if below.size else int(acc.size)


def k_star(acc_L, threshold: float = 0.95) -> int:
  """The hardest level solved: the largest k with accuracy >= threshold at every level
  0..k (-1 if level 0 already fails); for k-hop, the hardest k solved."""
  below = np.nonzero(np.asarray(acc_L) < threshold)[0]
  return int(below[0]) - 1 if below.size else len(acc_L) - 1


def make_evaluate(task, cfg: ModelConfig):
  """jitted (params_M, arch_M, batch) -> {per_position_acc [M,T], loss [M], seq_acc [M],
  per_position_loss [M,T], eval_<name> [M] for each of the task's own measures,
  per_level_acc [M,L] (tasks with `levels`: token accuracy of the examples at each level)}."""
  model = Transformer(cfg)

  def one(params, arch, batch):
    out = jax.vmap(lambda x: model.apply({"params": params}, x, arch))(batch.inputs)
    loss_BxT, correct_BxT = per_token_loss(out, batch.targets, task.loss)
    m_BxT = batch.mask.astype(jnp.float32)
    per_pos = lambda v: (v * m_BxT).sum(0) / jnp.maximum(m_BxT.sum(0), 1.0)
    res = dict(per_position_acc=per_pos(correct_BxT), per_position_loss=per_pos(loss_BxT),
               loss=(loss_BxT * m_BxT).sum() / m_BxT.sum(),
               seq_acc=jnp.mean(jnp.all((correct_BxT > 0) | (m_BxT == 0), axis=1)))
    res.update({f"eval_{k}": v for k, v in task.measures(out, batch).items()})
    levels = task.levels(batch)
    if levels is not None:
      level_B, num = levels
      at_BxL = (level_B[:, None] == jnp.arange(num)[None]).astype(jnp.float32)
      hits_L = at_BxL.T @ (correct_BxT * m_BxT).sum(1)
      res["per_level_acc"] = hits_L / jnp.maximum(at_BxL.T @ m_BxT.sum(1), 1.0)
    return res

  # `one` jitted inline: the same program text, and the model traced once per one-model
  # shape however many models a (rebuilt) program vmaps it over
  return jax.jit(jax.vmap(jax.jit(one, inline=True), in_axes=(0, 0, None)))


def per_position_acc_sliced(evaluate, batch, chunks: int) -> np.ndarray:
  """[M, T] held-out accuracy per position of `evaluate` (batch -> make_evaluate's dict)
  over `batch`, evaluated in `chunks` slices of its examples (the last padded with rows
  that count nowhere): each slice's 0/1 hits per position are recovered exactly from its
  mean and summed, so the result is the whole batch's (in the evaluator's float32) at a
  slice's memory."""
  mask_BxT = np.asarray(batch.mask)
  size = mask_BxT.shape[0]
  chunks = max(1, min(chunks, size))
  per = -(-size // chunks)
  pad = per * chunks - size
  if pad:  # one slice shape (one compile): padded rows have mask False
    batch = jax.tree.map(lambda x: jnp.concatenate([x, jnp.zeros((pad,) + x.shape[1:],
                                                                 x.dtype)]), batch)
  hits = 0.0
  for c in range(chunks):
    part = jax.tree.map(lambda x: x[c * per:(c + 1) * per], batch)
    acc_MxT = np.asarray(jax.device_get(evaluate(part)["per_position_acc"]), np.float64)
    hits = hits + np.rint(acc_MxT * np.asarray(part.mask).sum(0))
  return (hits / np.maximum(mask_BxT.sum(0), 1)).astype(np.float32)  # the evaluator's


def summarize(res_M, mask_T, threshold: float = 0.95) -> list[dict]:
  """Host-side rows per model: n*, final held-out loss, sequence accuracy, and for tasks
  with levels the hardest level solved (k_star) and the accuracy per level."""
  res = jax.device_get(res_M)
  rows = []
  for m in range(len(res["loss"])):
    rows.append(dict(n_star=n_star(res["per_position_acc"][m], mask_T, threshold),
                     eval_loss=float(res["loss"][m]), seq_acc=float(res["seq_acc"][m])))
    rows[-1].update({k: float(v[m]) for k, v in res.items() if k.startswith("eval_")
                     and k != "eval_loss"})
    if "per_level_acc" in res:
      acc_L = res["per_level_acc"][m]
      rows[-1].update(k_star=k_star(acc_L, threshold),
                      level_acc=" ".join(f"{a:.3f}" for a in acc_L))
  return rows
