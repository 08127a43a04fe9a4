"""Cells -> groups: which models share one compiled program, and what it will cost.

Models of one length may share a program. `pad` puts them all in one padded program
(wasted FLOPs, one compile); `bucket` gives each true shape its own program (no waste,
more compiles); `auto` picks per length by the cost model below.
Imports core.ensemble and sweep.grid; writes nothing.
"""
from __future__ import annotations

import dataclasses
import hashlib

from depthscale.config import ConfigError
from depthscale.sweep.grid import Cell


def step_flops(depth: int, width: int, repeats: int, seq: int, batch: int,
               mlp_ratio: int = 4, out_dim: int = 0) -> float:
  """Training FLOPs of one step: 6 x matmul params x tokens + attention (fwd+bwd)."""
  layer_params = (4 + 2 * mlp_ratio) * width * width
  matmul = depth * repeats * layer_params + width * out_dim
  attention = 12 * depth * repeats * seq * seq * width * batch
  return 6.0 * matmul * seq * batch + attention


@dataclasses.dataclass(frozen=True)
class Group:
  cells: tuple[Cell, ...]
  length: int

  @property
  def id(self) -> str:
    """Stable name from the member cells (same grid -> same ids across reruns)."""
    h = hashlib.sha1("|".join(c.key for c in self.cells).encode()).hexdigest()[:10]
    return f"n{self.length}-{len(self.cells)}m-{h}"

  @property
  def specs(self):
    return [c.spec for c in self.cells]

  def padded_shape(self):
    s = self.specs
    return (max(x.depth for x in s), max(x.width for x in s), max(x.repeats for x in s))


def group_cost(g: Group, seq: int, batch: int, steps: int, mlp_ratio=4, out_dim=0):
  """(padded FLOPs, useful FLOPs) of training the whole group."""
  d, w, r = g.padded_shape()
  padded = len(g.cells) * step_flops(d, w, r, seq, batch, mlp_ratio, out_dim) * steps
  useful = sum(step_flops(s.depth, s.width, s.repeats, seq, batch, mlp_ratio, out_dim)
               for s in g.specs) * steps
  return padded, useful


def _chunks(cells, size):
  return [tuple(cells[i:i + size]) for i in range(0, len(cells), size)]


def fit_memory(groups: list[Group], limit_bytes: float, seq: int, c, vocab=0, out_dim=0):
  """Groups split (evenly, in order) until each one's memory estimate fits the limit; a
  one-line ConfigError if a single model cannot fit."""
  out = []
  for g in groups:
    mem = lambda cells: memory_bytes(Group(tuple(cells), g.length), seq, c.train.batch_size,
                                     c.model.mlp_ratio, vocab, out_dim)
    parts = 1
    while mem(g.cells[:-(-len(g.cells) // parts)]) > limit_bytes:
      if parts == len(g.cells):
        one = max(mem((x,)) for x in g.cells)
        raise ConfigError(
            f"plan.device_memory_gb={c.plan.device_memory_gb:g}: one model of length "
            f"{g.length} needs ~{one / 2**30:.2f} GB (planner's estimate); raise the limit, "
            "or lower train.batch_size or the model's size")
      parts += 1
    out.extend(Group(ch, g.length) for ch in _chunks(g.cells, -(-len(g.cells) // parts)))
  return out


def make_plan(cells: list[Cell], c, seq_len, out_dim=0, vocab=0) -> list[Group]:
  """Groups for `cells`; `seq_len(length)` gives the task's positions per example. With
  plan.device_memory_gb > 0, groups are split to fit it (the estimate of memory_bytes)."""
  cap, steps, batch = c.plan.max_models_per_group, c.train.steps, c.train.batch_size
  secs_per_flop = 1.0 / (c.plan.gflops * 1e9)
  groups = []
  for length in sorted({x.length for x in cells}):
    here = [x for x in cells if x.length == length]
    seq = seq_len(length)
    pad = [Group(ch, length) for ch in _chunks(here, cap)]
    shapes = {}
    for x in here:
      shapes.setdefault(x.spec.shape(), []).append(x)
    bucket = [Group(ch, length) for v in shapes.values() for ch in _chunks(v, cap)]
    strategy = c.plan.strategy
    if strategy == "auto":
      cost = lambda gs: sum(group_cost(g, seq, batch, steps, c.model.mlp_ratio, out_dim)[0]
                            * secs_per_flop + c.plan.compile_s for g in gs)
      strategy = "pad" if cost(pad) <= cost(bucket) else "bucket"
    chosen = pad if strategy == "pad" else bucket
    if c.plan.get("device_memory_gb", 0):
      chosen = fit_memory(chosen, c.plan.device_memory_gb * 2**30, seq, c, vocab, out_dim)
    groups.extend(chosen)
  return groups


def memory_bytes(g: Group, seq: int, batch: int, mlp_ratio=4, vocab=0, out_dim=0):
  """Rough device memory: params + Adam moments + grads (4 copies, f32) and the
  activations kept for the backward pass (~ (8 + 2 mlp_ratio) x width per token per
  layer, plus attention maps), all times the models in the group."""
  d, w, r = g.padded_shape()
  params = d * (4 + 2 * mlp_ratio) * w * w + (vocab + seq + out_dim) * w
  acts = d * r * batch * seq * ((8 + 2 * mlp_ratio) * w + 2 * seq * 4)
  return len(g.cells) * 4 * (4 * params + acts)


def cost_fn(task, c, out_dim=0):
  """Seconds a group is expected to take (the planner's cost model)."""
  def cost(g: Group) -> float:
    padded, _ = group_cost(g, task.seq_len(g.length), c.train.batch_size, c.train.steps,
                           c.model.mlp_ratio, out_dim)
    return padded / (c.plan.gflops * 1e9) + c.plan.compile_s
  return cost
