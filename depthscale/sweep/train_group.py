"""Train one group of models (one compiled program, core/program.py) to the end and evaluate it.

Metrics of chunk c are read on the host only after chunk c+1 is dispatched, so the
device never waits for Python. With checkpoints, the whole stacked state and the curves
so far are saved every `checkpoint_every` steps; a rerun resumes from the latest and,
since batches are a function of (seed, step), produces the same bits.
Imports core/ only; writes only through the checkpointer it is given.
"""
from __future__ import annotations

import dataclasses
import sys
import time

import jax
import numpy as np
from tqdm.auto import tqdm

from depthscale.core import metrics, program, stopping, train

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
  fingerprint: str = ""            # the compiled program's (core/program.py)


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


DISPATCH_S = 2.0  # target seconds of one dispatch: a stop request waits for at most ~2


def next_dispatch(n: int, steps_per_s: float | None, k: int) -> int:
  """Steps in the next dispatch: double from 1 until a rate is measured, then enough
  for about DISPATCH_S seconds; never more than steps_per_call (k)."""
  if steps_per_s is None:
    return min(2 * n, k)
  return max(1, min(k, int(steps_per_s * DISPATCH_S)))


class Hooks:
  """What the caller hears from a group in training (the defaults do nothing):
  `should_stop()` after every dispatch (True: checkpoint at the current step, then
  Interrupted); `before_save(step, curves)` before every checkpoint (it may raise to
  abandon the group, e.g. a lost lease); `on_progress(step, steps_per_s)` after every
  dispatch read back."""

  def should_stop(self) -> bool:
    return False

  def before_save(self, step: int, curves: dict) -> None:
    pass

  def on_progress(self, step: int, steps_per_s: float | None) -> None:
    pass


def train_group(task, specs, tcfg: train.TrainConfig, *, steps_per_call: int = 100,
                eval_size: int = 1000, threshold: float = 0.95,
                model_options: dict | None = None, progress: bool = True,
                desc: str = "group", devices=None, checkpoints=None,
                checkpoint_every: int = 0, hooks: Hooks | None = None, probed=None,
                memory_limit: float | None = None,
                stop: stopping.Rule | None = None) -> GroupResult:
  """Train a group to the end. Dispatches are sized by time (at most steps_per_call
  steps, about DISPATCH_S seconds each) so that `hooks.should_stop()` is served within
  seconds: the state is then checkpointed at the current step and Interrupted raised.
  `probed` (a sweep.probe.Probe of this program) sizes the dispatches from the start; a
  compiled program needing more than `memory_limit` bytes per device is refused before
  it runs (MemoryError: the plan's fit should have prevented it). `stop` (a
  core.stopping.Rule other than "none") evaluates the models every `stop.every` steps and
  freezes each one that is done; the group then ends when all are (rows gain
  `trained_steps` and `stop`)."""
  hooks = hooks or Hooks()
  k, total = steps_per_call, tcfg.total_steps
  stop = stop if stop is not None and stop.kind != "none" else None
  if total % k or (checkpoint_every and checkpoint_every % k) or (stop and stop.every % k):
    raise ValueError(f"total_steps ({total}), checkpoint_every ({checkpoint_every}) and "
                     f"stop.every must be multiples of steps_per_call ({k})")
  n_real = len(specs)
  prog = program.build(task, specs, tcfg, model_options, k, devices)
  # A compacted group runs its models in program order (deepest first, dealt over the
  # devices); curves, rows, evaluation and checkpoints stay in spec order.
  order, back, devices = prog.order, prog.back, prog.devices
  cfg, tcfg, state, hp, arch = prog.cfg, prog.tcfg, prog.state, prog.hp, prog.arch
  prog.state = None  # the only reference is `state`: a restored state frees the initial one
  m = len(prog.specs)
  names = CURVES + task.measure_names(tcfg.length)  # the task's own measures, per step
  curves = {name: np.full((total, m), np.nan, np.float32) for name in names}
  start, st = 0, stopping.StopState.fresh(n_real)
  evaluate = metrics.make_evaluate(task, cfg)
  held = metrics.held_out(task, tcfg.length, eval_size)
  mask_T = np.asarray(held.mask).any(0)

  def payload():  # what a checkpoint holds: the real models only, in spec order
    out = {"state": real_models(program.take(state, back), n_real),
           "curves": real_models(curves, n_real, 1)}
    return dict(out, stop=st.as_tree()) if stop else out

  if checkpoints is not None:  # checkpoints hold the real models only: any device count
    step, saved = checkpoints.restore_latest(payload())
    if step is not None:
      state = jax.tree.map(lambda new, old: jax.device_put(new, old.sharding),
                           program.take(refill(saved["state"], m), order), state)
      curves, start = refill(saved["curves"], m, 1), step
      st = stopping.StopState.from_tree(saved["stop"]) if stop else st
      print(f"depthscale: {desc} resumes from its step-{step} checkpoint", file=sys.stderr)

  def held_out_rows():
    res = program.take(evaluate(state.params, arch, held), back)
    return res, metrics.summarize(res, mask_T, threshold)[:n_real]

  def check_stops():  # evaluate, decide, freeze the models that are done (on device)
    nonlocal state
    frozen = np.array(program.take(np.asarray(state.frozen), back))  # a writable copy
    done = stop.update(st, at, held_out_rows()[1], frozen, task.scaled_by, int(mask_T.sum()))
    if done:
      frozen[done] = True
      frozen = program.take(frozen, order) if order is not None else frozen
      if m > n_real:  # filler copies of the last model follow it
        frozen[n_real:] = frozen[n_real - 1]
      state = state.replace(frozen=jax.device_put(frozen, state.frozen.sharding))
  steps_fn, compile_s, memory = prog.run, prog.compile_s, prog.memory_bytes
  if memory_limit and memory > memory_limit:
    raise MemoryError(f"{desc}: the compiled program needs {memory / 2**30:.3g} GB per "
                      f"device, over the limit of {memory_limit / 2**30:.3g} GB")
  bar = tqdm(total=total, initial=start, desc=f"{desc} ({m} models)", unit="step",
             disable=not progress, leave=False)
  rate = 1.0 / probed.step_s if probed is not None else None
  t0, pending, last_done, save_s = time.perf_counter(), None, None, 0.0

  def drain():  # copy the metrics of the oldest dispatch in flight to the host
    nonlocal pending, rate, last_done
    if pending is None:  # already read (a stop check just before a checkpoint)
      return
    first, n, new = pending
    got = jax.device_get(new)
    now = time.perf_counter()
    if last_done is not None:  # the device was busy since the previous dispatch ended
      rate = n / max(now - last_done, 1e-9)
    last_done, pending = now, None
    for name in names:
      curves[name][first:first + n] = program.take(got[name][:n], back, 1)
    bar.update(n)
    hooks.on_progress(first + n, rate)

  at, n = start, (1 if rate is None else next_dispatch(1, rate, k))
  while at < total and st.running.any():
    boundary = (at // checkpoint_every + 1) * checkpoint_every if checkpoint_every else total
    if stop:
      boundary = min(boundary, (at // stop.every + 1) * stop.every)
    n = min(n, k, boundary - at, total - at)
    state, new = steps_fn(state, hp, arch, np.int32(n))  # runs while we read the last one
    if pending is not None:
      drain()
    pending, at = (at, n, new), at + n
    n = next_dispatch(n, rate, k)
    if stop and at % stop.every == 0 and at < total:
      drain()
      check_stops()
    saving = checkpoints is not None and checkpoint_every and at % checkpoint_every == 0
    halt = hooks.should_stop()
    if (saving or halt) and at < total and st.running.any():
      drain()
      if checkpoints is not None:
        s0 = time.perf_counter()
        hooks.before_save(at, curves)
        checkpoints.save(at, payload())
        last_done = None  # the save's time is not training time
        save_s += time.perf_counter() - s0
      if halt:
        bar.close()
        raise Interrupted(at)
  if pending is not None:
    drain()
  bar.close()
  train_s = time.perf_counter() - t0 - save_s  # checkpoints and live logging: save_s
  res, rows = held_out_rows()
  frozen = np.array(program.take(np.asarray(state.frozen), back))
  if stop:
    stop.finish(st, total)
    for i in range(n_real):  # a stopped model's curves end at its stop step
      for name in names:
        curves[name][st.stopped_at[i]:, i] = np.nan
  for i, (spec, row) in enumerate(zip(specs, rows)):
    last = st.stopped_at[i] if stop else total
    if stop:
      row.update(trained_steps=int(last), stop=st.reason_of(i))
      frozen[i] = frozen[i] and st.reason_of(i) not in ("solved", "plateau")  # not NaN
    row.update(task=task.name, depth=spec.depth, width=spec.width, heads=spec.heads,
               seed=spec.seed, lr=spec.lr, repeats=spec.repeats, length=tcfg.length,
               final_loss=float(curves["loss"][last - 1, i]), steps=total,
               frozen=bool(frozen[i]),
               devices=len(devices), models_in_program=m,
               train_s=train_s, save_s=save_s, compile_s=compile_s, memory_bytes=memory,
               probe_step_s=probed.step_s if probed is not None else None)
  acc = np.asarray(jax.device_get(res["per_position_acc"]))[:n_real, mask_T]
  curves = {k: v[:, :n_real] for k, v in curves.items()}
  return GroupResult(rows=rows, curves=curves, per_position_acc=acc,
                     fingerprint=prog.fingerprint)
