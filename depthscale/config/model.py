"""The model section: the options every model of a study shares (ModelConfig fields),
their checks, and widths that divide into heads. The valid names are the registries of
model/transformer.py, which acts on them."""
from __future__ import annotations

import ml_collections

from depthscale.config.base import ConfigError, choice, number
from depthscale.config.fields import field, one_of, section
from depthscale.model import transformer


def add(c: ml_collections.ConfigDict) -> None:
  t = transformer
  section(c, "model", "the options every model of the study shares (ModelConfig's fields)")
  field(c, "model.heads", 4, "attention heads per layer (used when head_dim is 0)")
  field(c, "model.head_dim", 0, "> 0: each model has width // head_dim heads of this size "
        "(else model.heads everywhere)")
  field(c, "model.mlp_ratio", 4, "the MLP's hidden width over the model's width (an int >= 1)")
  field(c, "model.pos", "learned", f"positions: {one_of(t.POSITIONS)} (a learned table, "
        "rotary q/k, or none)")
  field(c, "model.dtype", "float32", f"parameters and activations: {one_of(t.DTYPES)}")
  field(c, "model.compute_dtype", "float32", f"matmuls: {one_of(t.COMPUTE_DTYPES)} "
        "(float32: in dtype)")
  how = ("; how the one model is computed (auto: the fastest measured on the study's "
         "device): memory and speed, not the function trained, so a workdir may be rerun "
         "with another")
  field(c, "model.attention", "auto", f"the attention kernel: {one_of(t.ATTENTIONS)}{how}")
  field(c, "model.remat", "auto", f"what the backward pass recomputes: {one_of(t.REMATS)}{how}")
  field(c, "model.unroll", "auto", f"the layer stack's scan: {one_of(t.UNROLLS)}{how}")
  field(c, "model.gelu", "xla", f"what the MLP's GELU keeps for the backward pass: "
        f"{one_of(t.GELUS)} (xla: autodiff's intermediates; recompute: only its input, the "
        "derivative recomputed from it); how the one model is computed (the same function "
        "and gradients), so a workdir may be rerun with another")


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
  choice(c, "model.gelu", transformer.GELUS)
