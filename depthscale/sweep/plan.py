"""Cells -> groups: which models share one compiled program, and what it will cost.

Models of one length may share a program. `pad` puts them all in one padded program
(wasted FLOPs, one compile); `bucket` gives each true shape its own program (no waste,
more compiles); `compact` is `pad` whose layers run only on the models that have them
(model/compact.py: width still padded); `auto` picks per length by the cost model below.
Takes a resolved Study (sweep/study.py); writes nothing (the workdir's frozen plan:
sweep/plan_file.py).
"""
from __future__ import annotations

import dataclasses
import hashlib
import heapq

from depthscale.core import halving, train
from depthscale.errors import ConfigError
from depthscale.model import compact
from depthscale.sweep.grid import Cell

STRATEGIES = ("auto", "bucket") + train.LAYOUTS  # plan.strategy (see above; make_plan)


def may_compact(strategy: str) -> bool:
  """Whether `strategy` may give a group the compact layout."""
  return strategy in ("auto", "compact")


def matmul_params(depth: int, width: int, repeats: int = 1, mlp_ratio: int = 4,
                  out_dim: int = 0) -> int:
  """Parameters that take part in matmuls: per layer q,k,v,o (4 w^2) and the mlp
  (2 mlp_ratio w^2), and the head (w x out_dim); no embedding, bias or norm."""
  return depth * repeats * ((4 + 2 * mlp_ratio) * width * width) + width * out_dim


def step_flops(depth: int, width: int, repeats: int, seq: int, batch: int,
               mlp_ratio: int = 4, out_dim: int = 0) -> float:
  """Training FLOPs of one model's step, the one count the planner and the bench use:
  6 x matmul params x tokens + attention (fwd+bwd of QK^T and AV)."""
  matmul = matmul_params(depth, width, repeats, mlp_ratio, out_dim)
  attention = 12 * depth * repeats * seq * seq * width * batch
  return 6.0 * matmul * seq * batch + attention


@dataclasses.dataclass(frozen=True)
class Group:
  """Models that share one compiled program. `models_per_chunk` and `remat` ("" = the
  study's) are set by the memory fit, `layout` (pad | compact) by the strategy; they
  never change the group's id or results."""
  cells: tuple[Cell, ...]
  length: int
  models_per_chunk: int = 0
  remat: str = ""
  layout: str = "pad"

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
  """(computed FLOPs, useful FLOPs) of training the whole group: computed = padded to the
  group's shape, or for a compact group at its padded width the model-layers the
  compacted stack runs (compact.computed_layers, on one device) plus every head."""
  d, w, r = g.padded_shape()
  padded = len(g.cells) * step_flops(d, w, r, seq, batch, mlp_ratio, out_dim) * steps
  if g.layout == "compact":
    layers = compact.computed_layers(compact.profile([(s.depth, s.repeats) for s in g.specs],
                                                     1))
    heads = len(g.cells) * step_flops(0, w, 1, seq, batch, mlp_ratio, out_dim)
    padded = (layers * step_flops(1, w, 1, seq, batch, mlp_ratio, 0) + heads) * steps
  useful = sum(step_flops(s.depth, s.width, s.repeats, seq, batch, mlp_ratio, out_dim)
               for s in g.specs) * steps
  return padded, useful


def _chunks(cells, size):
  return [tuple(cells[i:i + size]) for i in range(0, len(cells), size)]


def _params(g: Group, seq: int, mlp_ratio=4, vocab=0, out_dim=0) -> int:
  """Parameters of one model at the group's padded shape (layers, embeddings, head)."""
  d, w, _ = g.padded_shape()
  return d * (4 + 2 * mlp_ratio) * w * w + (vocab + seq + out_dim) * w


def param_bytes(g: Group, seq: int, mlp_ratio=4, vocab=0, out_dim=0) -> float:
  """Parameters, Adam moments and gradients (4 float32 copies) of the group: the memory
  no chunking or remat can remove (a lower bound, known before compiling)."""
  return len(g.cells) * 4 * 4 * _params(g, seq, mlp_ratio, vocab, out_dim)


def memory_options(g: Group):
  """What the fit tries, in order, to make a group fit without splitting it: all models
  at once, then chunks of M/2, M/4, ... models (lax.map), then remat with one model at a
  time."""
  m, out, b = len(g.cells), [(0, "")], len(g.cells) // 2
  while b >= 1:
    out.append((b, ""))
    b //= 2
  return out + [(1, "block")] if m > 1 else out + [(0, "block")]


def check_params_fit(groups: list[Group], limit_bytes: float, study) -> None:
  """A one-line ConfigError, before anything compiles, if the parameters and optimizer
  state of one model alone exceed the limit."""
  gb = f"{limit_bytes / 2**30:.3g} GB"
  for g in groups:
    one = max(param_bytes(Group((x,), g.length), study.seq_len(g.length),
                          study.config.model.mlp_ratio, study.vocab, study.output_dim)
              for x in g.cells)
    if one > limit_bytes:
      raise ConfigError(
          f"plan.device_memory_gb (limit {gb}): the parameters and optimizer state of one "
          f"model of length {g.length} need {one / 2**30:.3g} GB; raise the limit, or "
          "lower the model's size")


def fit_memory(groups: list[Group], limit_bytes: float, measure, study,
               log=lambda line: None) -> list[Group]:
  """Each group as it is if `measure(group)` (bytes per device) fits `limit_bytes`;
  else with models_per_chunk and then remat (memory_options); else split in halves,
  each fitted the same way."""
  check_params_fit(groups, limit_bytes, study)
  gb = f"{limit_bytes / 2**30:.3g} GB"

  def fit(g):
    for chunk, remat in memory_options(g):
      cand = dataclasses.replace(g, models_per_chunk=chunk, remat=remat)
      need = measure(cand)
      if need <= limit_bytes:
        if chunk or remat:
          log(f"group {g.id}: {need / 2**30:.3g} GB per device fits {gb} with "
              f"models_per_chunk={chunk}" + (f", remat={remat}" if remat else ""))
        return [cand]
    if len(g.cells) == 1:
      raise ConfigError(f"plan.device_memory_gb (limit {gb}): one model of length "
                        f"{g.length} needs {need / 2**30:.3g} GB even with remat; raise the "
                        "limit, or lower train.batch_size or the model's size")
    half = -(-len(g.cells) // 2)
    log(f"group {g.id}: split in two to fit {gb}")
    return (fit(Group(g.cells[:half], g.length, layout=g.layout))
            + fit(Group(g.cells[half:], g.length, layout=g.layout)))

  return [part for g in groups for part in fit(g)]


def make_plan(study, flops_per_s: float | None = None) -> list[Group]:
  """The study's groups, before any memory fit (a one-line ConfigError first if one
  model alone exceeds plan.device_memory_gb). `auto` weighs padded FLOPs at
  `flops_per_s` (the device's, see probe.flops_per_s; default plan.gflops) against
  plan.compile_s per program."""
  c, cells, out_dim = study.config, study.cells, study.output_dim
  cap, steps, batch = c.plan.max_models_per_group, c.train.steps, c.train.batch_size
  secs_per_flop = 1.0 / (flops_per_s or c.plan.gflops * 1e9)
  groups = []
  for length in sorted({x.length for x in cells}):
    here = [x for x in cells if x.length == length]
    seq = study.seq_len(length)
    pad = [Group(ch, length) for ch in _chunks(here, cap)]
    shapes = {}
    for x in here:
      shapes.setdefault(x.spec.shape(), []).append(x)
    bucket = [Group(ch, length) for v in shapes.values() for ch in _chunks(v, cap)]
    options = dict(pad=pad, bucket=bucket,
                   compact=[dataclasses.replace(g, layout="compact") for g in pad])
    strategy = c.plan.strategy
    if strategy == "auto":  # ties to pad, then bucket (compact only where it saves FLOPs)
      cost = lambda gs: sum(group_cost(g, seq, batch, steps, c.model.mlp_ratio, out_dim)[0]
                            * secs_per_flop + c.plan.compile_s for g in gs)
      strategy = min(("pad", "bucket", "compact"), key=lambda k: cost(options[k]))
    groups.extend(options[strategy])
  if c.plan.device_memory_gb:
    check_params_fit(groups, c.plan.device_memory_gb * 2**30, study)
  check_settings_whole(groups, c)
  return groups


def check_settings_whole(groups: list[Group], c) -> None:
  """With train.stop=halving a setting's learning rates and seeds are decided together,
  so each setting must lie in one group: else a one-line ConfigError."""
  if c.train.get("stop") != "halving":
    return
  where = {}
  for g in groups:
    for x in g.cells:
      key = (x.length, halving.setting(x.spec))
      if where.setdefault(key, g.id) != g.id:
        raise ConfigError(
            f"train.stop=halving: the models of one setting (length {x.length}, depth "
            f"{x.spec.depth}, width {x.spec.width}) fall in two groups; raise "
            f"plan.max_models_per_group (now {c.plan.max_models_per_group}) or the device "
            "memory, so that a setting's learning rates and seeds train together")


def makespan(jobs, lanes: int) -> float:
  """Wall time of `lanes` workers pulling `jobs` (durations) largest first."""
  loads = [0.0] * max(1, lanes)
  for j in sorted(jobs, reverse=True):
    heapq.heapreplace(loads, loads[0] + j)
  return max(loads)


def share_size(n_devices: int, group_sizes) -> int:
  """Devices per share, when a worker's devices are dealt into shares that train groups
  side by side: the divisor s of n_devices with the shortest makespan, a group taking
  ceil(M / s) (its models per device) on each of n_devices / s shares; ties go to fewer
  filler copies (models padded up to a multiple of s), then to larger shares. 3-model
  groups on 4 devices: 4 shares of one device; one 6-model group on 8: one share of 8."""
  sizes = list(group_sizes)
  def key(s):
    per = [-(-m // s) for m in sizes]
    return (makespan(per, n_devices // s), sum(p * s - m for p, m in zip(per, sizes)), -s)
  return min((s for s in range(1, n_devices + 1) if n_devices % s == 0), key=key)


def share_of(devs, groups: list[Group]) -> list:
  """The devices of one share (the first share_size of `devs`): what trains a group."""
  return list(devs)[:share_size(len(devs), [len(g.cells) for g in groups])]


def to_json(groups: list[Group]) -> list[dict]:
  return [dict(id=g.id, length=g.length, cells=[x.key for x in g.cells],
               models_per_chunk=g.models_per_chunk, remat=g.remat, layout=g.layout)
          for g in groups]


def from_json(rows: list[dict], cells: list[Cell]) -> list[Group]:
  """The groups of a saved plan, over today's cells (a ValueError if they differ)."""
  by_key = {x.key: x for x in cells}
  groups = [Group(tuple(by_key[k] for k in r["cells"]), r["length"], r["models_per_chunk"],
                  r["remat"], r.get("layout", "pad")) for r in rows]  # older plans: pad
  if sorted(x.key for g in groups for x in g.cells) != sorted(by_key):
    raise ValueError("the saved plan's models differ from the study's")
  return groups


def memory_bytes(g: Group, seq: int, batch: int, mlp_ratio=4, vocab=0, out_dim=0):
  """Rough device memory: params + Adam moments + grads (4 copies, f32) and the
  activations kept for the backward pass (~ (8 + 2 mlp_ratio) x width per token per
  layer, plus attention maps), all times the models in the group."""
  d, w, r = g.padded_shape()
  params = _params(g, seq, mlp_ratio, vocab, out_dim)
  acts = d * r * batch * seq * ((8 + 2 * mlp_ratio) * w + 2 * seq * 4)
  return len(g.cells) * 4 * (4 * params + acts)


def cost_fn(study):
  """Seconds a group is expected to take (the planner's cost model)."""
  c = study.config
  def cost(g: Group) -> float:
    computed, _ = group_cost(g, study.seq_len(g.length), c.train.batch_size, c.train.steps,
                             c.model.mlp_ratio, study.output_dim)
    return computed / (c.plan.gflops * 1e9) + c.plan.compile_s
  return cost


def step_seconds(study, g: Group, flops_per_s: float, models: int = 0) -> float:
  """The planner's seconds for one step of group g's program at `flops_per_s` (with
  `models` > 0 slots of its len(g.cells) models: that share of it)."""
  c = study.config
  computed, _ = group_cost(g, study.seq_len(g.length), c.train.batch_size, 1,
                           c.model.mlp_ratio, study.output_dim)
  share = models / len(g.cells) if 0 < models < len(g.cells) else 1.0
  return computed * share / flops_per_s


def largest_first(study, groups: list[Group]) -> list[Group]:
  """The order in which workers pull groups: the planner's cost, largest first."""
  return sorted(groups, key=cost_fn(study), reverse=True)
