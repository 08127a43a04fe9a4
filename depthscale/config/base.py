"""What every section's checks share: the one-line ConfigError and the checks of a
number, a list of distinct ints, a name among a registry's, a batch and an accuracy.
A registry is a tuple or dict of the code that acts on the field: its valid names."""
from __future__ import annotations

import math

from depthscale.errors import ConfigError

MAX_BATCH = 2**20   # train.batch_size and eval.size: examples on the device at once


def int_list(c, field: str, lo: int = 1, hi: int | None = None) -> list[int]:
  """grid.`field`: a non-empty list of distinct ints in [lo, hi)."""
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


INT_MAX = 2**31 - 1


def number(c, field: str, lo=0.0, strict: bool = False, integer: bool = False):
  """`section.name`: a finite number (an int if `integer`) >= lo (> lo if `strict`)."""
  sec, name = field.split(".")
  v = c[sec][name]
  ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
  if integer:
    ok = ok and isinstance(v, int)
  if not ok or v < lo or (strict and v <= lo):
    kind = "an int" if integer else "a number"
    cmp = ">" if strict else ">="
    raise ConfigError(f"{field}: {v!r} is not {kind} {cmp} {lo}")
  if integer and v > INT_MAX:  # steps and counts reach compiled code as int32
    raise ConfigError(f"{field}: {v} is more than {INT_MAX} (2^31 - 1), what a 32-bit "
                      "counter holds; give a smaller number")
  return v


def choice(c, field: str, valid) -> str:
  """`section.name`: one of `valid`, the registry of the code that acts on it."""
  sec, name = field.split(".")
  v, valid = c[sec][name], tuple(valid)
  if v not in valid:
    raise ConfigError(f"{field}: {v!r}; valid: {', '.join(n or repr(n) for n in valid)}")
  return v


def examples(c, field: str) -> int:
  """`section.name`: a count of examples on the device at once, in [1, MAX_BATCH]."""
  v = number(c, field, 1, integer=True)
  if v > MAX_BATCH:
    raise ConfigError(f"{field}: {v} examples at once; give at most {MAX_BATCH} (2^20)")
  return v


def accuracy(c, field: str) -> float:
  """`section.name`: an accuracy in (0, 1]."""
  v = number(c, field, 0.0, strict=True)
  if v > 1:
    raise ConfigError(f"{field}: {v!r} is an accuracy; give a number in (0, 1]")
  return v
