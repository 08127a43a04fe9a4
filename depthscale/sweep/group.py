"""Train one group of models (one compiled program) to the end and evaluate it.

Metrics of chunk c are read on the host only after chunk c+1 is dispatched, so the
device never waits for Python. With checkpoints, the whole stacked state and the curves
so far are saved every `checkpoint_every` steps; a rerun resumes from the latest and,
since batches are a function of (seed, step), produces the same bits.
Imports core/, model/, tasks/ and io.checkpoint; writes only through the checkpointer.
"""
from __future__ import annotations

import dataclasses
import sys
import time

import jax
import numpy as np
from tqdm.auto import tqdm

from depthscale.core import ensemble, metrics, train

CURVES = ("loss", "accuracy", "lr", "stage")


class Interrupted(Exception):
  """A stop was requested (SIGTERM/SIGUSR2); the state was checkpointed at `step`."""

  def __init__(self, step: int):
    super().__init__(f"stopped at step {step}")
    self.step = step


@dataclasses.dataclass
class GroupResult:
  rows: list[dict]                 # one per model, in spec order
  curves: dict[str, np.ndarray]    # name -> [steps, M]
  per_position_acc: np.ndarray     # [M, counted positions] held-out


def model_config(task, specs, tcfg: train.TrainConfig, model: dict | None = None):
  """The group's static ModelConfig: the specs' padded shape, the task's sizes and the
  study's shared model options `model` (ModelConfig fields: pos, mlp_ratio, dtype,
  compute_dtype, attention, remat)."""
  return ensemble.group_config(specs, max_len=task.seq_len(tcfg.length),
                               output_dim=task.output_dim(tcfg.length),
                               vocab=task.input_vocab, input_dim=task.input_dim,
                               **(model or {}))


def build(task, specs, tcfg: train.TrainConfig, model: dict | None = None, devices=None):
  """The group's program inputs, with the models axis sharded over `devices` (all local
  devices by default; M must divide evenly, see `fill`)."""
  cfg = model_config(task, specs, tcfg, model)
  state = train.init_state(ensemble.init_params(specs, cfg), tcfg)
  inputs = (state, train.stack_hparams(specs), ensemble.stack_arch(specs, cfg))
  devices = devices or jax.local_devices()
  if len(devices) > 1:
    mesh = jax.sharding.Mesh(np.asarray(devices), ("models",))
    by_model = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("models"))
    inputs = jax.device_put(inputs, by_model)
  return (cfg,) + inputs


def in_order(specs, order):
  """The specs in program order (`order` from train.arrange; None: as given)."""
  return list(specs) if order is None else [specs[i] for i in order]


def take(tree, index, axis: int = 0):
  """Host copies of every leaf with its models axis reordered by `index` (None: as is)."""
  if index is None:
    return tree
  return jax.tree.map(lambda x: np.take(np.asarray(x), index, axis=axis), tree)


def fill(specs, n_devices: int):
  """Specs padded with copies of the last one so that M divides over the devices (the
  copies' results are dropped); models never talk to each other, so no collectives."""
  extra = -len(specs) % n_devices
  return list(specs) + [specs[-1]] * extra


def real_models(tree, n_real: int, axis: int = 0):
  """The first n_real models of every leaf (what checkpoints hold: no filler copies)."""
  return jax.tree.map(lambda x: x[(slice(None),) * axis + (slice(0, n_real),)], tree)


def refill(tree, m: int, axis: int = 0):
  """Leaves with n_real models along `axis`, filled up to m with copies of the last one:
  the state the filler copies would have had, since they train exactly as that model."""
  def one(x):
    x = np.asarray(x)
    last = np.take(x, [x.shape[axis] - 1], axis=axis)
    return np.concatenate([x] + [last] * (m - x.shape[axis]), axis=axis)
  return jax.tree.map(one, tree)


def compiled_memory_bytes(compiled) -> int:
  """Peak bytes per device from XLA's memory analysis of a compiled program: arguments
  + outputs - donated (aliased) + temporaries."""
  m = compiled.memory_analysis()
  return int(m.argument_size_in_bytes + m.output_size_in_bytes - m.alias_size_in_bytes
             + m.temp_size_in_bytes)


DISPATCH_S = 2.0  # target seconds of one dispatch: a stop request waits for at most ~2


def next_dispatch(n: int, steps_per_s: float | None, k: int) -> int:
  """Steps in the next dispatch: double from 1 until a rate is measured, then enough
  for about DISPATCH_S seconds; never more than steps_per_call (k)."""
  if steps_per_s is None:
    return min(2 * n, k)
  return max(1, min(k, int(steps_per_s * DISPATCH_S)))


def train_group(task, specs, tcfg: train.TrainConfig, *, steps_per_call: int = 100,
                eval_size: int = 1000, threshold: float = 0.95, model: dict | None = None,
                progress: bool = True,
                desc: str = "group", devices=None,
                checkpoints=None, checkpoint_every: int = 0,
                should_stop=lambda: False, before_save=None, on_progress=None,
                probed=None, memory_limit: float | None = None) -> GroupResult:
  """Train a group to the end. Dispatches are sized by time (at most steps_per_call
  steps, about DISPATCH_S seconds each) so that `should_stop()` is served within seconds:
  the state is then checkpointed at the current step and Interrupted raised.
  `before_save(step, curves)` runs before every checkpoint (it may raise to abandon the
  group, e.g. a lost lease); `on_progress(step, steps_per_s)` after every dispatch.
  `probed` (a sweep.probe.Probe of this program) sizes the dispatches from the start; a
  compiled program needing more than `memory_limit` bytes per device is refused before
  it runs (MemoryError: the plan's fit should have prevented it)."""
  k, total = steps_per_call, tcfg.total_steps
  if total % k or (checkpoint_every and checkpoint_every % k):
    raise ValueError(f"total_steps ({total}) and checkpoint_every ({checkpoint_every}) must "
                     f"be multiples of steps_per_call ({k})")
  n_real = len(specs)
  devices = devices or jax.local_devices()
  specs = fill(specs, len(devices))
  # A compacted group runs its models in program order (deepest first, dealt over the
  # devices); curves, rows, evaluation and checkpoints stay in spec order.
  order, tcfg = train.arrange(specs, tcfg, len(devices))
  back = None if order is None else np.argsort(order)  # program -> spec order
  cfg, state, hp, arch = build(task, in_order(specs, order), tcfg, model, devices=devices)
  m = len(specs)
  names = CURVES + task.measure_names(tcfg.length)  # the task's own measures, per step
  curves = {name: np.full((total, m), np.nan, np.float32) for name in names}
  start = 0
  if checkpoints is not None:  # checkpoints hold the real models only: any device count
    step, saved = checkpoints.restore_latest(
        {"state": real_models(take(state, back), n_real),
         "curves": real_models(curves, n_real, 1)})
    if step is not None:
      state = jax.tree.map(lambda new, old: jax.device_put(new, old.sharding),
                           take(refill(saved["state"], m), order), state)  # where it lives
      curves, start = refill(saved["curves"], m, 1), step
      print(f"depthscale: {desc} resumes from its step-{step} checkpoint", file=sys.stderr)
  t0 = time.perf_counter()
  steps_fn = train.make_train_steps(task, cfg, tcfg, k, devices).lower(
      state, hp, arch, np.int32(1)).compile()
  compile_s, memory = time.perf_counter() - t0, compiled_memory_bytes(steps_fn)
  if memory_limit and memory > memory_limit:
    raise MemoryError(f"{desc}: the compiled program needs {memory / 2**30:.3g} GB per "
                      f"device, over the limit of {memory_limit / 2**30:.3g} GB")
  bar = tqdm(total=total, initial=start, desc=f"{desc} ({m} models)", unit="step",
             disable=not progress, leave=False)
  rate = 1.0 / probed.step_s if probed is not None else None
  t0, pending, last_done, save_s = time.perf_counter(), None, None, 0.0

  def drain():  # copy the metrics of the oldest dispatch in flight to the host
    nonlocal pending, rate, last_done
    first, n, new = pending
    got = jax.device_get(new)
    now = time.perf_counter()
    if last_done is not None:  # the device was busy since the previous dispatch ended
      rate = n / max(now - last_done, 1e-9)
    last_done, pending = now, None
    for name in names:
      curves[name][first:first + n] = take(got[name][:n], back, 1)
    bar.update(n)
    if on_progress is not None:
      on_progress(first + n, rate)

  at, n = start, (1 if rate is None else next_dispatch(1, rate, k))
  while at < total:
    boundary = (at // checkpoint_every + 1) * checkpoint_every if checkpoint_every else total
    n = min(n, k, boundary - at, total - at)
    state, new = steps_fn(state, hp, arch, np.int32(n))  # runs while we read the last one
    if pending is not None:
      drain()
    pending, at = (at, n, new), at + n
    n = next_dispatch(n, rate, k)
    saving = checkpoints is not None and checkpoint_every and at % checkpoint_every == 0
    stop = should_stop()
    if (saving or stop) and at < total:
      drain()
      if checkpoints is not None:
        s0 = time.perf_counter()
        if before_save is not None:
          before_save(at, curves)
        checkpoints.save(at, {"state": real_models(take(state, back), n_real),
                              "curves": real_models(curves, n_real, 1)})
        last_done = None  # the save's time is not training time
        save_s += time.perf_counter() - s0
      if stop:
        bar.close()
        raise Interrupted(at)
  if pending is not None:
    drain()
  bar.close()
  train_s = time.perf_counter() - t0 - save_s  # checkpoints and live logging: save_s
  batch = metrics.held_out(task, tcfg.length, eval_size)
  res = take(metrics.make_evaluate(task, cfg)(state.params, arch, batch), back)
  mask_T = np.asarray(batch.mask).any(0)
  rows = metrics.summarize(res, mask_T, threshold)[:n_real]
  specs, frozen = specs[:n_real], take(np.asarray(state.frozen), back)
  for i, (spec, row) in enumerate(zip(specs, rows)):
    row.update(task=task.name, depth=spec.depth, width=spec.width, heads=spec.heads,
               seed=spec.seed, lr=spec.lr, repeats=spec.repeats, length=tcfg.length,
               final_loss=float(curves["loss"][-1, i]), steps=total, frozen=bool(frozen[i]),
               devices=len(devices), models_in_program=m,
               train_s=train_s, save_s=save_s, compile_s=compile_s, memory_bytes=memory,
               probe_step_s=probed.step_s if probed is not None else None)
  acc = np.asarray(jax.device_get(res["per_position_acc"]))[:n_real, mask_T]
  curves = {k: v[:, :n_real] for k, v in curves.items()}
  return GroupResult(rows=rows, curves=curves, per_position_acc=acc)
