"""The task contract (base.py), checked on sampled batches: `check(task, length)` returns
one line per breach, each saying what to change (`depthscale tasks check`).

Checked: first the structural part (structure.py: attributes, options, lengths, shapes and
dtypes by jax.eval_shape), then on sampled batches: `sample` pure in its key (same key, same batch; another
key, another batch), jittable and vmappable over keys with the eager results; shapes and
dtypes against seq_len, output_dim and input_vocab / input_dim; inputs and targets in
range; masks not empty; decode giving plain values that survive JSON; a claimed
prefix_consistent against sampled batches (two examples, of this length or a shorter one,
whose inputs agree on a prefix must agree on its targets); levels; one scalar per
measure name. The cost of sampling against a training step is checked above (the CLI).
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import jax
import numpy as np

from depthscale.tasks.base import Batch, Task
from depthscale.tasks.structure import BATCH, measure_keys, shapes, what, structural

PREFIX_BATCH = 2048    # examples per length in the prefix-consistency check


def check(task: Task, length: int, seed: int = 0) -> list[str]:
  """Every breach of the contract by `task` at size `length`, one line each ([] if none).
  A check that cannot run because an earlier one failed is skipped, not reported twice."""
  problems = structural(task, [length])
  if problems:
    return problems
  key = jax.random.key(seed)
  try:
    batch = task.sample(key, BATCH, length)
  except Exception as e:
    return [f"sample(key, {BATCH}, {length}) raised {what(e)}; it must return a Batch"]
  problems = shapes(task, batch, length, BATCH)
  if problems:
    return problems
  problems += _values(task, batch, length)
  problems += _purity(task, key, batch, length)
  problems += _decode(task, batch)
  problems += _levels(task, batch)
  problems += _measures(task, batch, length)
  if task.prefix_consistent and not problems:
    problems += _prefix(task, key, length)
  return problems


def _values(task: Task, b: Batch, length: int) -> list[str]:
  problems = []
  inputs, targets, mask = np.asarray(b.inputs), np.asarray(b.targets), np.asarray(b.mask)
  if task.input_vocab and (inputs.min() < 0 or inputs.max() >= task.input_vocab):
    problems.append(f"inputs span {inputs.min()}..{inputs.max()}, outside 0..input_vocab-1 "
                    f"= 0..{task.input_vocab - 1}; raise input_vocab or fix sample")
  if not mask.any():
    problems.append("mask is empty: no position counts in the loss; mark the positions "
                    "that carry labels True")
  elif not mask.any(axis=1).all():
    problems.append(f"{int((~mask.any(axis=1)).sum())} of {len(mask)} examples have an "
                    "empty mask (trained on nothing); give each example a labelled position")
  if task.loss == "xent":
    out = task.output_dim(length)
    t = targets[mask] if mask.any() else targets
    if t.size and (t.min() < 0 or t.max() >= out):
      problems.append(f"targets at masked positions span {t.min()}..{t.max()}, outside "
                      f"0..output_dim({length})-1 = 0..{out - 1}; raise output_dim or fix "
                      "sample")
  elif not np.isfinite(targets[mask]).all():
    problems.append("targets at masked positions are not all finite")
  if not task.input_vocab and not np.isfinite(inputs).all():
    problems.append("inputs are not all finite")
  return problems


def _equal(a: Batch, b: Batch) -> bool:
  return all(np.array_equal(np.asarray(x), np.asarray(y), equal_nan=x.dtype.kind == "f")
             for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def _purity(task: Task, key, batch: Batch, length: int) -> list[str]:
  problems: list[str] = []
  if not _equal(task.sample(key, BATCH, length), batch):  # jit and vmap would differ too
    return ["sample is not pure: the same key gave two different batches; draw all "
            "randomness from `key` with jax.random (no numpy/random/global state)"]
  if _equal(task.sample(jax.random.fold_in(key, 1), BATCH, length), batch):
    problems.append("sample ignores its key: another key gave the same batch; draw the "
                    "examples from `key` with jax.random")
  try:
    jitted = jax.jit(lambda k: task.sample(k, BATCH, length))(key)
  except Exception as e:
    return problems + [f"sample is not jittable ({what(e)}); use jax.numpy on traced "
                       "values, no Python branches or numpy on them"]
  if not _equal(jitted, batch):
    problems.append("sample under jax.jit differs from the eager call; keep it a pure "
                    "function of (key, batch_size, length)")
  keys = jax.random.split(key, 2)
  try:
    mapped = jax.vmap(lambda k: task.sample(k, BATCH, length))(keys)
  except Exception as e:
    return problems + [f"sample is not vmappable over keys ({what(e)}); the engine samples "
                       "every model's batch in one vmap"]
  for i in range(2):
    if not _equal(jax.tree.map(lambda x: x[i], mapped), task.sample(keys[i], BATCH, length)):
      problems.append("sample under jax.vmap over keys differs from the per-key calls; "
                      "keep it a pure function of its key")
      break
  return problems


def _decode(task: Task, batch: Batch) -> list[str]:
  for i in range(BATCH):
    try:
      d = task.decode(batch, i)
      again = json.loads(json.dumps(d))
    except Exception as e:
      return [f"decode(batch, {i}) failed ({what(e)}); return a dict of plain Python values "
              "(int, float, bool, str, lists)"]
    if not isinstance(d, dict) or again != _as_json(d):
      return [f"decode(batch, {i}) is not a dict of plain values that survive JSON (got "
              f"{type(d).__name__}); convert arrays with int()/float()/tolist()"]
  return []


def _as_json(v):
  """`v` as JSON reads it back: tuples become lists (base.py allows either)."""
  if isinstance(v, dict):
    return {k: _as_json(x) for k, x in v.items()}
  if isinstance(v, (list, tuple)):
    return [_as_json(x) for x in v]
  return v


def _levels(task: Task, batch: Batch) -> list[str]:
  try:
    got = task.levels(batch)
  except Exception as e:
    return [f"levels(batch) raised {what(e)}"]
  if got is None:
    return []
  level, n = got
  level = np.asarray(level)
  if level.shape != (BATCH,) or level.dtype.kind != "i" or not isinstance(n, int):
    return [f"levels returned shape {level.shape} {level.dtype}, {n!r}; return (int32 [B], "
            "the number of levels L)"]
  if level.min() < 0 or level.max() >= n:
    return [f"levels span {level.min()}..{level.max()}, outside 0..{n - 1}"]
  return []


def _measures(task: Task, batch: Batch, length: int) -> list[str]:
  names = tuple(task.measure_names(length))
  out = jax.random.normal(jax.random.key(1), (BATCH, task.seq_len(length),
                                              task.output_dim(length)))
  try:
    got = jax.jit(task.measures)(out, batch)
  except Exception as e:
    return [f"measures(out, batch) under jax.jit raised {what(e)}"]
  return measure_keys(got, names, length)


def _prefix(task: Task, key, length: int) -> list[str]:
  """prefix_consistent=True claims the first seq_len(t) positions of a length-n example
  are a length-t example. Checked where sampling gives evidence: examples (of length n,
  or of a shorter length t) whose inputs agree on their first p positions must agree on
  the targets there (masked positions of both)."""
  if not task.input_vocab:
    return []  # float inputs never collide: no evidence either way
  shorter = max(1, length // 2)
  pools = [(n, task.sample(jax.random.fold_in(key, 7 + i), PREFIX_BATCH, n))
           for i, n in enumerate(sorted({length, shorter}))]
  t_min = min(task.seq_len(n) for n in {length, shorter})
  for p in range(1, t_min + 1):
    seen: dict[bytes, tuple[np.ndarray, np.ndarray, int]] = {}
    collisions = 0
    for n, b in pools:
      x, y, m = (np.asarray(a)[:, :p] for a in (b.inputs, b.targets, b.mask))
      for i in range(len(x)):
        k = x[i].tobytes()
        if k not in seen:
          seen[k] = (y[i], m[i], n)
          continue
        collisions += 1
        y0, m0, n0 = seen[k]
        both = m0 & m[i]
        if (y0[both] != y[i][both]).any():
          return [f"prefix_consistent=True is false: two sampled examples (at lengths {n0} "
                  f"and {n}) share their first {p} inputs but differ in the targets "
                  "there (labels depend on later positions or on the length); set "
                  "prefix_consistent = False"]
    if collisions == 0:
      break  # longer prefixes collide even less
  return []


_SECOND_PROCESS = """
import json, sys
import jax
from depthscale import tasks
from depthscale.tasks.contract import batch_digest
spec, options, length, seed, n = json.loads(sys.argv[1])
print(batch_digest(tasks.make(spec, **options).sample(jax.random.key(seed), n, length)))
"""


def batch_digest(batch: Batch) -> str:
  """SHA-256 of a batch's arrays (the cross-process check compares them)."""
  h = hashlib.sha256()
  for x in jax.tree.leaves(batch):
    h.update(np.asarray(x).tobytes())
  return h.hexdigest()


def across_processes(task: Task, spec: str, options: dict, length: int,
                     seed: int = 0) -> list[str]:
  """`sample` with one key in a second Python process must give this process's batch: a
  task that draws a salt at import or in __init__ (numpy, random, time) passes the checks
  within one process, and would give every worker and every resume other data."""
  with jax.default_device(jax.devices("cpu")[0]):  # both on CPU: the same arithmetic,
    here = batch_digest(task.sample(jax.random.key(seed), BATCH, length))  # no device shared
  try:
    p = subprocess.run([sys.executable, "-c", _SECOND_PROCESS,
                        json.dumps([spec, options, length, seed, BATCH])],
                       capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, JAX_PLATFORMS="cpu"))
  except subprocess.TimeoutExpired:
    return ["sample in a second process took over 600 s (a length this large is better "
            "checked with a smaller --length)"]
  if p.returncode != 0:
    last = (p.stderr.strip().splitlines() or ["no output"])[-1]
    return [f"sample in a second process failed ({last[:300]})"]
  if p.stdout.strip().splitlines()[-1:] != [here]:
    return ["sample differs between two processes for the same key: the task draws "
            "randomness outside `key` (a salt at import or in __init__, numpy, random, "
            "time); derive everything from `key` with jax.random"]
  return []
