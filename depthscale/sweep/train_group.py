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

from depthscale.core import ensemble, halving, metrics, program, stopping, train
from depthscale.sweep import resize, slots as slots_lib

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
  dispatch read back; `on_slots(summary)` after every stopping check of a group with a
  rule or a queue (sweep/slots.summary: slots busy, queued, stopped, steps left)."""

  def should_stop(self) -> bool:
    return False

  def before_save(self, step: int, curves: dict) -> None:
    pass

  def on_progress(self, step: int, steps_per_s: float | None) -> None:
    pass

  def on_slots(self, summary: dict) -> None:
    pass


def train_group(task, specs, tcfg: train.TrainConfig, *, steps_per_call: int = 100,
                eval_size: int = 1000, threshold: float = 0.95,
                model_options: dict | None = None, progress: bool = True,
                desc: str = "group", devices=None, checkpoints=None,
                checkpoint_every: int = 0, hooks: Hooks | None = None, probed=None,
                memory_limit: float | None = None,
                stop: stopping.Rule | None = None, slots: int = 0,
                rebuild_steps: int | None = None) -> GroupResult:
  """Train a group to the end. Dispatches are sized by time (at most steps_per_call
  steps, about DISPATCH_S seconds each) so that `hooks.should_stop()` is served within
  seconds: the state is then checkpointed at the current step and Interrupted raised.
  `probed` (a sweep.probe.Probe of this program) sizes the dispatches from the start; a
  compiled program needing more than `memory_limit` bytes per device is refused before
  it runs (MemoryError: the plan's fit should have prevented it).
  `stop` (a core.stopping.Rule other than "none") evaluates the models in training every
  `stop.every` steps; a model that is done leaves its slot. `slots` (0: one per model)
  below the number of models puts the rest in a queue: a freed slot takes the next queued
  model of its shape (sweep/slots.py). Either way rows gain `trained_steps` and `stop`,
  and each model's curves run on its own steps. `rebuild_steps` (None: never) is what a
  compile costs in steps of the program: with a rule, idle slots are dropped or given to
  queued models of other shapes in a rebuilt program when that saves more (resize.py)."""
  hooks = hooks or Hooks()
  k, total, n_real = steps_per_call, tcfg.total_steps, len(specs)
  n_slots = slots if 0 < slots < n_real else n_real
  if stop is None or stop.kind == "none":
    stop = stopping.Rule("none", every=k) if n_slots < n_real else None
  if stop is not None:
    stop = dataclasses.replace(stop, budget=total)
  ladder = None  # successive halving: one slot per scout (core/halving.py)
  if stop is not None and stop.kind == "halving":
    ladder = halving.Ladder(specs, stop.eta, total, stop.every or k)
    n_slots = len(ladder.scouts)
  if total % k or (checkpoint_every and checkpoint_every % k) or (
      stop and (stop.every % k or total % stop.every)):
    raise ValueError(f"total_steps ({total}), checkpoint_every ({checkpoint_every}) and "
                     f"stop.every must be multiples of steps_per_call ({k}), and total_steps "
                     "of stop.every")
  queue = n_slots < n_real
  rebuilding = stop is not None and rebuild_steps is not None
  by_slot = queue or rebuilding  # checkpoints hold the slots as they are (and the table)
  chosen = (ladder.scouts if ladder else
            slots_lib.first_models(specs, n_slots, tcfg.layout))
  build = lambda idx: program.build(task, [specs[i] for i in idx], tcfg, model_options, k,
                                    devices, cover=specs)
  prog, built = build(chosen), list(chosen)  # built: the models the program was built with
  # A compacted group runs its models in program order (deepest first, dealt over the
  # devices); curves, rows and evaluation stay in spec order (the slot table maps them).
  order, back, devices = prog.order, prog.back, prog.devices
  cfg, tcfg, state, hp, arch = prog.cfg, prog.tcfg, prog.state, prog.hp, prog.arch
  prog.state, fingerprint = None, prog.fingerprint  # `state`: the only reference to it
  m = m0 = len(prog.specs)
  initial = order if order is not None else np.arange(m)  # index into the built models
  table = slots_lib.SlotTable.start(initial, chosen, n_real)
  shapes = [slots_lib.slot_shape(s, tcfg.layout) for s in specs]
  slot_shapes = [slots_lib.slot_shape(s, tcfg.layout) for s in prog.specs]  # filler: last's
  compile_s = prog.compile_s
  names = CURVES + task.measure_names(tcfg.length)  # the task's own measures, per step
  curves = {name: np.full((total, n_real), np.nan, np.float32) for name in names}
  start, st = 0, stopping.StopState.fresh(n_real)
  evaluate = metrics.make_evaluate(task, cfg)
  held = metrics.held_out(task, tcfg.length, eval_size)
  mask_T = np.asarray(held.mask).any(0)
  like = jax.eval_shape(evaluate, state.params, arch, held)
  done = {k_: np.zeros((n_real,) + v.shape[1:], v.dtype) for k_, v in like.items()}

  def payload():  # what a checkpoint holds
    if by_slot:  # every slot as it is (program order, at the first program's size)
      return {"slots": resize.pad_rows(state, m0), "curves": curves, "stop": st.as_tree(),
              "table": table.as_tree(m0), "done": done, "built": resize.pad(built, m0)}
    out = {"state": program.real_models(program.take(state, back), n_real), "curves": curves}
    return dict(out, stop=st.as_tree(), done=done, table=table.as_tree()) if stop else out

  if checkpoints is not None:  # by spec (any device count) or by slot (the same count)
    step, saved = checkpoints.restore_latest(payload())
    if step is not None:
      put = lambda new, old: jax.device_put(new, old.sharding)
      if by_slot:
        table = slots_lib.SlotTable.from_tree(saved["table"])
        if [int(i) for i in saved["built"] if i >= 0] != built:  # a rebuilt program
          built = [int(i) for i in saved["built"] if i >= 0]
          prog = build(built)
          state, hp, arch, prog.state = prog.state, prog.hp, prog.arch, None
          compile_s += prog.compile_s
          slot_shapes = [slots_lib.slot_shape(s, tcfg.layout) for s in prog.specs]
        kept = program.take(saved["slots"], np.arange(len(table.holder)))  # unpadded
        state = jax.tree.map(put, kept, state)
        hp, arch = slots_lib.holders_inputs(table, specs, cfg, hp, arch)
      else:
        state = jax.tree.map(put, program.take(program.refill(saved["state"], m), order), state)
      curves, start = saved["curves"], step
      if stop:
        st, done = stopping.StopState.from_tree(saved["stop"]), saved["done"]
        table = slots_lib.SlotTable.from_tree(saved["table"])
      print(f"depthscale: {desc} resumes from its step-{step} checkpoint", file=sys.stderr)

  ok = lambda i: st.stopped_at[i] < 0 and (ladder is None or ladder.eligible(i, at))

  def check_stops(decide=True):  # evaluate, decide; a model that is done leaves its slot
    nonlocal state, hp, arch, prog, built, slot_shapes, compile_s, last_done
    frozen = np.array(state.frozen)
    if decide:  # never at step 0: every model is first judged at its own step `every`
      res = jax.device_get(evaluate(state.params, arch, held))
      rows = metrics.summarize(res, mask_T, threshold)
      in_slots = {int(i): rows[j] for j, i in enumerate(table.holder) if i >= 0}
      items = [(i, at - table.entered[i], rows[j], frozen[j])
               for j, i in enumerate(table.holder) if i >= 0]
      now = stop.update(st, items, task.scaled_by, int(mask_T.sum()))
      if ladder:
        now += ladder.halve(st, at, in_slots, table.entered, task.scaled_by,
                            int(mask_T.sum()))
      for i in now:
        j = table.slot_of(i)
        for key in done:
          done[key][i] = res[key][j]
        table.holder[j] = slots_lib.IDLE
    for j in np.nonzero(table.holder < 0)[0]:  # freed (or filler) slots take queued models
      i = table.next_for(slot_shapes[j], shapes, ok) if queue else None
      if i is None:
        frozen[j] = True
        continue
      state, hp, arch = slots_lib.put_model(state, hp, arch, j, specs[i], cfg, tcfg)
      table.holder[j], table.entered[i], frozen[j] = i, at, False
    state = slots_lib.set_frozen(state, frozen)
    summary = slots_lib.summary(table, st, at, total)
    new = resize.choose(table.holder, prog.specs, [i for i in table.queued if ok(i)], specs,
                        tcfg.layout, len(devices), summary["steps_left"],
                        rebuild_steps) if rebuilding and decide else None
    p = build(new) if new is not None else None
    if p is not None and (memory_limit is None or p.memory_bytes <= memory_limit):
      print(f"depthscale: {desc} rebuilt at step {at}: {len(prog.specs)} -> {len(p.specs)} "
            f"slots, {int((table.holder >= 0).sum())} in training", file=sys.stderr)
      state, hp, arch, table.holder = resize.move(p, state, hp, arch, table.holder, new)
      table.entered[[i for i in new if table.entered[i] < 0]] = at
      prog, built, p.state, compile_s = p, new, None, compile_s + p.compile_s
      slot_shapes = [slots_lib.slot_shape(s, tcfg.layout) for s in prog.specs]
      summary, last_done = slots_lib.summary(table, st, at, total), None
    hooks.on_slots(summary)

  total_global = total * -(-n_real // n_slots)  # an upper bound with a queue
  bar = tqdm(total=total_global, initial=start, desc=f"{desc} ({m} models)", unit="step",
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
    for j, i in enumerate(table.holder):  # each model's curves on its own steps
      if i >= 0:
        t = first - table.entered[i]
        for name in names:
          curves[name][t:t + n, i] = got[name][:n, j]
    bar.update(n)
    hooks.on_progress(first + n, rate)

  at, n = start, (1 if rate is None else next_dispatch(1, rate, k))
  training = lambda: ((table.holder >= 0).any() or (  # halving: all scouts frozen early
      ladder is not None and (st.stopped_at[table.queued] < 0).any())) if stop else at < total
  if stop and at == 0 and queue:
    check_stops(decide=False)  # filler slots take queued models before the first step
  while training():
    boundary = (at // checkpoint_every + 1) * checkpoint_every if checkpoint_every else 2**62
    boundary = min(boundary, (at // stop.every + 1) * stop.every if stop else total)
    n = min(n, k, boundary - at)
    state, new = prog.run(state, hp, arch, np.int32(n))  # runs while we read the last one
    if pending is not None:
      drain()
    pending, at = (at, n, new), at + n
    n = next_dispatch(n, rate, k)
    if stop and at % stop.every == 0:
      drain()
      check_stops()
    saving = checkpoints is not None and checkpoint_every and at % checkpoint_every == 0
    halt = hooks.should_stop()
    if (saving or halt) and training():
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
  drain()
  bar.close()
  train_s = time.perf_counter() - t0 - save_s  # checkpoints and live logging: save_s
  if stop:  # every model's results were kept when it stopped
    res, frozen = done, np.asarray([st.reason_of(i) == "frozen" for i in range(n_real)])
  else:
    res = program.take(jax.device_get(evaluate(state.params, arch, held)), back)
    res = program.real_models(res, n_real)
    frozen = program.take(np.asarray(state.frozen), back)
  rows = metrics.summarize(res, mask_T, threshold)
  never = [stop is not None and table.entered[i] < 0 for i in range(n_real)]
  for i, (spec, row) in enumerate(zip(specs, rows)):
    last = int(st.stopped_at[i]) if stop else total
    if never[i]:  # halved before it trained: nothing was measured
      row = rows[i] = dict.fromkeys(row)
    if stop:
      row.update(trained_steps=last, stop=st.reason_of(i), started_at=int(table.entered[i]))
    row.update(task=task.name, depth=spec.depth, width=spec.width, heads=spec.heads,
               seed=spec.seed, lr=spec.lr, repeats=spec.repeats, length=tcfg.length,
               final_loss=None if never[i] else float(curves["loss"][last - 1, i]),
               steps=total, frozen=bool(frozen[i]), devices=len(devices), models_in_program=m,
               train_s=train_s, save_s=save_s, compile_s=compile_s,
               memory_bytes=prog.memory_bytes,
               probe_step_s=probed.step_s if probed is not None else None)
  acc = np.asarray(res["per_position_acc"], np.float64)[:, mask_T]
  acc[np.asarray(never, bool)] = np.nan
  return GroupResult(rows=rows, curves=curves, per_position_acc=acc, fingerprint=fingerprint)

