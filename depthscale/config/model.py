"""The model section: the options every model of a study shares (ModelConfig fields),
their checks, and widths that divide into heads. The valid names are the registries of
model/transformer.py, which acts on them."""
from __future__ import annotations

import ml_collections

from depthscale.config.base import ConfigError, choice, number
from depthscale.model import transformer


def add(c: ml_collections.ConfigDict) -> None:
  c.model = ml_collections.ConfigDict(dict(heads=4, head_dim=0, mlp_ratio=4, pos="learned",
                                           dtype="float32", compute_dtype="float32",
                                           attention="auto", remat="auto", unroll="auto"))
  # head_dim > 0: heads = width // head_dim for each width (else model.heads everywhere)
  # attention, remat, unroll: how the one model is computed (model/transformer.py); auto
  # picks the fastest measured on the device the study runs on. They change memory and
  # speed, not the function trained, so a workdir may be rerun with others.


def check(c, widths) -> None:
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
  choice(c, "model.pos", transformer.POSITIONS)
  number(c, "model.mlp_ratio", 1, integer=True)
  choice(c, "model.dtype", transformer.DTYPES)
  choice(c, "model.compute_dtype", transformer.COMPUTE_DTYPES)
  if c.model.compute_dtype == "bfloat16" and c.model.dtype == "float64":
    raise ConfigError("model.compute_dtype: bfloat16 with model.dtype=float64; give "
                      "model.dtype=float32 (or compute_dtype=float32)")
  choice(c, "model.attention", transformer.ATTENTIONS)
  choice(c, "model.remat", transformer.REMATS)
  choice(c, "model.unroll", transformer.UNROLLS)
