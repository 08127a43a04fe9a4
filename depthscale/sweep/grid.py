"""Config -> cells: every (model spec, length) the study trains, in a stable order.

A cell's `key` names it in files, W&B ids and results; it never depends on the plan.
"""
from __future__ import annotations

import dataclasses
import itertools

from depthscale.core.ensemble import ModelSpec
from depthscale.errors import UserError


@dataclasses.dataclass(frozen=True)
class Cell:
  spec: ModelSpec
  length: int

  @property
  def key(self) -> str:
    s = self.spec
    loop = f"-r{s.repeats}" if s.repeats > 1 else ""
    return f"n{self.length}-d{s.depth}{loop}-w{s.width}-h{s.heads}-lr{s.lr:g}-s{s.seed}"


def cells(c) -> list[Cell]:
  """The grid's cross product (length, depth, repeats, width, lr, seed); with
  grid.lr_width, each lr is scaled to the model's width (config/grid.py)."""
  g, t = c.grid, c.train
  base = g.get("lr_width", 0)
  out = []
  for n, d, r, w, lr, seed in itertools.product(g.length, g.depth, g.repeats, g.width,
                                                g.lr, g.seed):
    heads = w // c.model.head_dim if c.model.get("head_dim") else c.model.heads
    lr = float(lr) * base / w if base else float(lr)
    spec = ModelSpec(depth=d, width=w, heads=heads, seed=seed, lr=lr,
                     weight_decay=float(t.weight_decay), warmup=int(t.warmup), repeats=r)
    out.append(Cell(spec, n))
  keys = [x.key for x in out]
  if len(set(keys)) != len(keys):
    raise UserError("grid: repeated values give duplicate models; list each value once")
  return out
