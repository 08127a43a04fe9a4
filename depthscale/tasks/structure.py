"""The cheap, structural part of the task contract (base.py), checked without sampling any
data: `structural(task, lengths)` returns one line per breach, each saying what to change.
Every command that loads a task runs it before writing or compiling anything (config's
grid.check_lengths, `tasks show`); contract.py's `check` adds the sampled checks.

Checked: the declared attributes and their types, options(), check_length, output_dim /
seq_len / measure names at each length, and the shapes and dtypes of one sample and of
`measures` (jax.eval_shape: nothing is compiled).
"""
from __future__ import annotations

import numbers
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from depthscale.tasks.base import Batch, Task

BATCH = 8              # the batch most checks sample
MAX_DIM = 1 << 20      # output_dim, input_vocab, input_dim, seq_len: beyond this, a typo


def structural(task: Task, lengths) -> list[str]:
  """Every structural breach by `task` at each of `lengths`, one line each ([] if none);
  a length's checks stop at its first breach, and the lengths at the first with one."""
  problems = _attributes(task)
  default = getattr(task, "default_length", None)
  if not isinstance(default, numbers.Integral) or isinstance(default, bool) or default < 1:
    problems.append(f"default_length={default!r}: set self.default_length to the paper's "
                    "size, an int >= 1")
  try:
    opts = task.options()
  except Exception as e:
    opts = None
    problems.append(f"options() raised {what(e)}; call super().__init__() or set "
                    "self._options to the dict of options the task was made with")
  if opts is not None and (not isinstance(opts, dict)
                           or not all(isinstance(k, str) for k in opts)):
    problems.append(f"options() returned {opts!r}; return a dict keyed by option name")
  if problems:
    return problems
  for n in lengths:
    problems += _at_length(task, n)
    if problems:
      break
  return problems


def _at_length(task: Task, n: int) -> list[str]:
  try:
    task.check_length(n)
  except ValueError as e:  # UserError included: the length is the user's to change
    return [f"length {n}: {' '.join(str(e).split())}"]
  except Exception as e:
    return [f"check_length({n}) raised {what(e)}; raise a one-line ValueError for a "
            "length the task cannot make"]
  sizes = {}
  for name in ("output_dim", "seq_len"):
    try:
      v = getattr(task, name)(n)
    except Exception as e:
      return [f"{name}({n}) raised {what(e)}"]
    if not isinstance(v, numbers.Integral) or isinstance(v, bool) or not 1 <= v <= MAX_DIM:
      return [f"{name}({n}) = {v!r}: not an int in 1..{MAX_DIM} (give a smaller length, or "
              f"return an int from {name})"]
    sizes[name] = v
  for name in ("input_vocab", "input_dim"):
    v = getattr(task, name)
    if v is not None and v > MAX_DIM:
      return [f"{name}={v}: more than {MAX_DIM}; is it a typo?"]
  try:
    names = task.measure_names(n)
  except Exception as e:
    return [f"measure_names({n}) raised {what(e)}"]
  if not isinstance(names, (tuple, list)) or not all(isinstance(k, str) for k in names):
    return [f"measure_names({n}) = {names!r}: return a tuple of strings"]
  try:
    batch = jax.eval_shape(lambda: task.sample(jax.random.key(0), BATCH, n))  # no compile
  except Exception as e:
    return [f"sample is not jittable ({what(e)}); use jax.numpy on traced values, no Python "
            "branches or numpy on them"]
  problems = shapes(task, batch, n, BATCH)
  if problems:
    return problems
  out = jax.ShapeDtypeStruct((BATCH, sizes["seq_len"], sizes["output_dim"]), jnp.float32)
  try:
    got = jax.eval_shape(task.measures, out, batch)
  except Exception as e:
    return [f"measures(out, batch) failed to trace ({what(e)})"]
  return measure_keys(got, tuple(names), n)


def what(e: Exception) -> str:
  return f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"


def _attributes(task: Task) -> list[str]:
  out = []
  if getattr(task, "loss", None) not in ("xent", "mse"):
    out.append(f"loss is {getattr(task, 'loss', None)!r}; set self.loss to 'xent' (class "
               "targets) or 'mse' (float targets)")
  vocab, dim = getattr(task, "input_vocab", "unset"), getattr(task, "input_dim", "unset")
  if (vocab is None) == (dim is None) or vocab == "unset" or dim == "unset":
    out.append(f"input_vocab={vocab!r}, input_dim={dim!r}: set exactly one (token ids: "
               "input_vocab, an int >= 1; float features: input_dim) and the other to None")
  for name, v in (("input_vocab", vocab), ("input_dim", dim)):
    if v not in (None, "unset") and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
      out.append(f"{name}={v!r}: give an int >= 1")
  if getattr(task, "scaled_by", None) not in ("n_star", "size", "loss"):
    out.append(f"scaled_by={getattr(task, 'scaled_by', None)!r}: give 'n_star', 'size' or "
               "'loss' (base.py says which)")
  if not isinstance(getattr(task, "name", None), str):
    out.append("name is not set: set self.name to a short string (it labels the results)")
  return out


def shapes(task: Task, b: Any, length: int, n: int) -> list[str]:
  if not isinstance(b, Batch):
    return [f"sample returned {type(b).__name__}; return depthscale.tasks.Batch(inputs, "
            "targets, mask)"]
  t, out = task.seq_len(length), task.output_dim(length)
  want_in = (n, t) if task.input_vocab else (n, t, task.input_dim)
  want_tg = (n, t) if task.loss == "xent" else (n, t, out)
  problems, shapes = [], []
  for name, arr, shape, kinds in (
      ("inputs", b.inputs, want_in, "i" if task.input_vocab else "f"),
      ("targets", b.targets, want_tg, "i" if task.loss == "xent" else "f"),
      ("mask", b.mask, (n, t), "b")):
    shape_now, dtype = tuple(np.shape(arr)), np.dtype(getattr(arr, "dtype", None) or
                                                       np.asarray(arr).dtype)
    kind = dtype.kind
    if shape_now != shape:
      shapes.append(f"{name} has shape {shape_now}, expected {shape}")
    if kind != kinds:
      want = {"i": "an int dtype (int32)", "f": "a float dtype (float32)", "b": "bool"}[kinds]
      problems.append(f"{name} has dtype {dtype}, expected {want}")
  if shapes:  # one line: a wrong seq_len puts every array off by the same amount
    problems.insert(0, f"{'; '.join(shapes)} ([batch, seq_len({length})={t}], then "
                    f"input_dim / output_dim({length})={out} for float arrays); fix sample or "
                    "seq_len / output_dim / input_dim")
  return problems


def measure_keys(got, names: tuple, length: int) -> list[str]:
  if not isinstance(got, dict) or tuple(sorted(got)) != tuple(sorted(names)):
    return [f"measures returned {sorted(got) if isinstance(got, dict) else type(got).__name__}"
            f", measure_names({length}) says {list(names)}; return one value per name"]
  bad = [k for k, v in got.items() if np.shape(v) != ()]
  if bad:
    return [f"measures {', '.join(bad)} are not scalars (shape {np.shape(got[bad[0]])}); "
            "return one number per measure for the whole batch"]
  return []
