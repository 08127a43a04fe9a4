"""One group in training: its program, state, slot table, stop state and curves.

A schedule (sweep/schedules/) decides which models hold the program's slots and when they
leave; the loop only dispatches, reads the metrics of each dispatch back while the next
runs, and calls the periodic work that is due (stopping check, checkpoint, progress).
Batches are a function of (seed, step), so a resumed run produces the same bits.
"""
from __future__ import annotations

import sys
import time

import jax
import numpy as np
from tqdm.auto import tqdm

from depthscale.errors import UserError
from depthscale.core import lengths, metrics, program, stopping
from depthscale.sweep import resize, saved_check, schedules, slots as slots_lib
from depthscale.sweep.group_options import Hooks, Interrupted, RunOptions, next_dispatch
from depthscale.sweep.group_result import CURVES, GroupResult, full_length_acc, rows_of


class GroupRun:
  """Train the models of blueprint `bp` (core/program.py) on `devices` under `opts`."""

  def __init__(self, bp: program.Blueprint, opts: RunOptions = RunOptions(), devices=None,
               checkpoints=None, hooks: Hooks | None = None, probed=None,
               desc: str = "group", progress: bool = True):
    self.bp, self.opts, self.checkpoints = bp, opts, checkpoints
    self.hooks, self.probed, self.desc, self.progress = hooks or Hooks(), probed, desc, progress
    self.specs, self.n, self.total = list(bp.models), len(bp.models), bp.tcfg.total_steps
    self.schedule = schedules.choose(self.specs, self.total, bp.tcfg.layout, bp.steps_per_call,
                                     opts.stop, opts.slots, opts.rebuild_steps)
    self._check_intervals()
    self.built = self.schedule.first()
    self._install(program.build(bp.subset(self.built), devices))
    self.compile_s, self.m0, self.fingerprint = (self.prog.compile_s, len(self.prog.specs),
                                                 self.prog.fingerprint)
    self.table = slots_lib.SlotTable.start(self._initial(), self.built, self.n)
    self.shapes = [slots_lib.slot_shape(s, self.tcfg.layout) for s in self.specs]
    names = (CURVES + ("paid",) * lengths.has_stages(bp.task, self.tcfg)
             + bp.task.measure_names(self.tcfg.length))  # the task's own measures
    self.curves = {k: np.full((self.total, self.n), np.nan, np.float32) for k in names}
    self.st, self.at = stopping.StopState.fresh(self.n), 0
    self.evaluate = metrics.evaluator(bp.task, self.cfg)
    # held out at the full length, measured on its prefix (growth: n* on all of it)
    self.held_full = metrics.held_out_set(bp.task, self.tcfg.full_length, opts.eval_size)
    self.held = self.held_full.prefix(bp.task.seq_len(self.tcfg.length))
    self.mask_T = np.asarray(self.held.mask).any(0)
    like = jax.eval_shape(self.evaluate, self.state.params, self.arch, self.held)
    self.done = {k: np.zeros((self.n,) + v.shape[1:], v.dtype) for k, v in like.items()}
    self.periodic = []   # (every, fn): called when the group step is a multiple of every
    if self.schedule.checks:
      self.every(self.schedule.every, self.check)
    if checkpoints is not None and opts.checkpoint_every:
      self.every(opts.checkpoint_every, self.save)
    self.pending, self.rate = None, (1.0 / probed.step_s if probed is not None else None)
    self.last_done, self.save_s, self.saved_at = None, 0.0, -1

  def every(self, steps: int, fn) -> None:
    """Call fn() whenever the group step reaches a multiple of `steps` (dispatches end
    there); in order of registration."""
    self.periodic.append((steps, fn))

  def _check_intervals(self) -> None:
    k, every, ckpt = self.bp.steps_per_call, self.schedule.every, self.opts.checkpoint_every
    if self.total % k or (ckpt and ckpt % k) or (every and (every % k or self.total % every)):
      raise ValueError(f"total_steps ({self.total}), checkpoint_every ({ckpt}) and "
                       f"stop.every must be multiples of steps_per_call ({k}), and total_steps "
                       "of stop.every")

  def _install(self, prog: program.Program) -> None:
    """Take a built program's inputs; `prog.state` is dropped (self.state: the only
    reference to the donated state)."""
    self.prog, self.cfg, self.tcfg, self.devices = prog, prog.cfg, prog.tcfg, prog.devices
    self.state, self.hp, self.arch, prog.state = prog.state, prog.hp, prog.arch, None
    self.slot_shapes = [slots_lib.slot_shape(s, prog.tcfg.layout) for s in prog.specs]

  def _initial(self) -> np.ndarray:
    """Each program slot's index into the models it was built with."""
    return self.prog.order if self.prog.order is not None else np.arange(len(self.prog.specs))

  def _build(self, built) -> program.Program:
    return program.build(self.bp.subset(built), self.devices)

  # -- checkpoints: one payload shape; a schedule adds its own fields --------------------

  def payload(self) -> dict:
    """Each model's state in spec order (a row for each model; those in no slot: a copy
    of slot 0), the curves, the stop state, the kept results, and the schedule's fields."""
    slot = np.zeros(self.n, np.int64)
    for j, i in enumerate(self.table.holder):
      if i >= 0:
        slot[i] = j
    out = {"models": program.take(self.state, slot), "curves": self.curves,
           "stop": self.st.as_tree(), "done": self.done}
    return dict(out, **self.schedule.fields(self.table, self.built, self.m0))

  def restore(self) -> None:
    """Continue from the latest checkpoint, if any (any device count for a static group;
    a queued one on the device count it was saved on)."""
    like = self.payload()
    step, saved = self.checkpoints.restore_latest(like, lambda at, tree: (
        saved_check.problem(tree, at, self.n, self.total, len(self.tcfg.stages()),
                            not self.schedule.checks)), saved_check.older_shapes(like))
    if step is None:
      return
    saved = saved_check.upgraded(saved, like)
    table, built = self.schedule.restore(saved)
    if table is not None:
      self._check_slots(step, len(np.asarray(saved["built"])))
    if built is not None and built != self.built:  # a rebuilt program
      self.built = built
      self._install(self._build(built))
      self.compile_s += self.prog.compile_s
    self.table = table or slots_lib.SlotTable.start(self._initial(), self.built, self.n)
    self.state = self._place(saved["models"])
    if not self.schedule.fillers_train:
      self.hp, self.arch = slots_lib.holders_inputs(self.table, self.specs, self.cfg,
                                                    self.hp, self.arch)
    self.curves, self.at = saved["curves"], step
    self.st, self.done = stopping.StopState.from_tree(saved["stop"]), saved["done"]
    print(f"depthscale: {self.desc} resumes from its step-{step} checkpoint", file=sys.stderr)

  def _check_slots(self, step: int, saved_slots: int) -> None:
    """A queued group's slot table is its program's, and that program's size depends on
    the device count: a checkpoint made with another size is refused in one line."""
    if saved_slots == self.m0:
      return
    devices = self.checkpoints.metadata(step).get("devices")
    raise UserError(
        f"{self.desc}: its step-{step} checkpoint was saved on "
        f"{devices or 'another number of'} device(s) ({saved_slots} program slots); this "
        f"worker has {len(self.devices)} ({self.m0} slots). Resume the group on "
        f"{devices or 'that many'} device(s) (--devices or CUDA_VISIBLE_DEVICES), or move "
        f"{self.checkpoints.manager.directory} aside to train it again from step 0")

  def _place(self, models):
    """The program's state with each slot's holder restored from `models` (spec order); a
    filler slot trains a copy of the last model (static) or stays idle and frozen."""
    holder = self.table.holder
    fill = self.built[-1] if self.schedule.fillers_train else slots_lib.IDLE
    src = np.where(holder >= 0, holder, fill)
    host = jax.device_get(self.state)

    def one(cur, saved):
      cur = np.array(cur)
      cur[src >= 0] = np.asarray(saved)[src[src >= 0]]
      return cur
    state = jax.tree.map(lambda c, s, d: jax.device_put(one(c, s), d.sharding),
                         host, models, self.state)
    if self.schedule.fillers_train:
      return state
    return slots_lib.set_frozen(state, np.asarray(state.frozen) | (holder < 0))

  def save(self) -> None:
    """Checkpoint at the current step (once per step, only while training goes on)."""
    if self.checkpoints is None or self.saved_at == self.at or not self.training():
      return
    self.drain()
    s0 = time.perf_counter()
    self.hooks.before_save(self.at, self.curves)
    self.checkpoints.save(self.at, self.payload(),
                          {"devices": len(self.devices), "slots": self.m0})
    self.last_done, self.saved_at = None, self.at  # the save's time is not training time
    self.save_s += time.perf_counter() - s0

  # -- the schedule's decisions, applied ---------------------------------------------------

  def check(self, decide: bool = True) -> None:
    """Evaluate the models in slots; the schedule stops some (their results are kept and
    their slots freed), queued models take free slots, and the program may be rebuilt.
    Never decides at step 0: every model is first judged at its own step `every`."""
    self.drain()
    table, frozen = self.table, np.array(self.state.frozen)
    if decide:
      res = jax.device_get(self.evaluate(self.state.params, self.arch, self.held))
      rows = metrics.summarize(res, self.mask_T, self.opts.threshold)
      now = self.schedule.stops(self.st, self.at, table, rows, frozen, self.bp.task.scaled_by,
                                int(self.mask_T.sum()))
      for i in now:
        j = table.slot_of(i)
        for key in self.done:
          self.done[key][i] = res[key][j]
        table.holder[j] = slots_lib.IDLE
    enters = self.schedule.enters(self.st, self.at, table, self.slot_shapes, self.shapes)
    for j in np.nonzero(table.holder < 0)[0]:
      if int(j) not in enters:
        frozen[j] = True
        continue
      i = enters[int(j)]
      self.state, self.hp, self.arch = slots_lib.put_model(
          self.state, self.hp, self.arch, j, self.specs[i], self.cfg, self.tcfg)
      table.holder[j], table.entered[i], frozen[j] = i, self.at, False
    self.state = slots_lib.set_frozen(self.state, frozen)
    summary = slots_lib.summary(table, self.st, self.at, self.total)
    if decide and self._rebuild(summary["steps_left"]):
      summary = slots_lib.summary(table, self.st, self.at, self.total)
    self.hooks.on_slots(summary)

  def _rebuild(self, steps_left: int) -> bool:
    new = self.schedule.rebuild(self.st, self.at, self.table, self.prog.specs,
                                len(self.devices), steps_left)
    if new is None:
      return False
    p = self._build(new)
    limit = self.opts.memory_limit
    if limit is not None and p.memory_bytes > limit:
      return False
    print(f"depthscale: {self.desc} rebuilt at step {self.at}: {len(self.prog.specs)} -> "
          f"{len(p.specs)} slots, {int((self.table.holder >= 0).sum())} in training",
          file=sys.stderr)
    moved = resize.move(p, self.state, self.hp, self.arch, self.table.holder, new)
    self._install(p)  # then the moved state, not the new program's own
    self.state, self.hp, self.arch, self.table.holder = moved
    self.table.entered[[i for i in new if self.table.entered[i] < 0]] = self.at
    self.built, self.compile_s, self.last_done = new, self.compile_s + p.compile_s, None
    return True

  # -- the loop -------------------------------------------------------------------------

  def training(self) -> bool:
    return self.schedule.training(self.st, self.at, self.table)

  def drain(self) -> None:
    """Copy the metrics of the dispatch in flight to the host (each model's curves on its
    own steps), then report progress."""
    if self.pending is None:  # already read
      return
    first, n, new = self.pending
    got = jax.device_get(new)
    now = time.perf_counter()
    if self.last_done is not None:  # the device was busy since the previous dispatch ended
      self.rate = n / max(now - self.last_done, 1e-9)
    self.last_done, self.pending = now, None
    with np.errstate(over="ignore"):  # a float64 loss past float32's range is inf here
      for j, i in enumerate(self.table.holder):
        if i >= 0:
          t = first - self.table.entered[i]
          for name, curve in self.curves.items():
            curve[t:t + n, i] = got[name][:n, j]
    self.bar.update(n)
    self.hooks.on_progress(first + n, self.rate)

  def _boundary(self) -> int:
    """The next group step at which periodic work is due (a static group: or its end)."""
    ends = [(self.at // e + 1) * e for e, _ in self.periodic]
    return min(ends + ([self.total] if not self.schedule.checks else []) + [2**62])

  def train(self) -> GroupResult:
    """Train to the end (or raise Interrupted after a checkpoint on a stop request)."""
    if self.checkpoints is not None:
      self.restore()
    k = self.bp.steps_per_call
    rounds = -(-self.n // len(self.built)) if self.schedule.queue else 1  # a bound
    self.bar = tqdm(total=self.total * rounds, initial=self.at, unit="step", leave=False,
                    desc=f"{self.desc} ({self.m0} models)", disable=not self.progress)
    t0 = time.perf_counter()
    if self.schedule.queue and self.at == 0:
      self.check(decide=False)  # filler slots take queued models before the first step
    n = 1 if self.rate is None else next_dispatch(1, self.rate, k)
    while self.training():
      n = min(n, k, self._boundary() - self.at)
      self.state, new = self.prog.run(self.state, self.hp, self.arch, np.int32(n))
      self.drain()  # the previous dispatch, while this one runs
      self.pending, self.at = (self.at, n, new), self.at + n
      n = next_dispatch(n, self.rate, k)
      halt = self.hooks.should_stop()
      for every, fn in self.periodic:
        if self.at % every == 0:
          fn()
      if halt and self.training():
        self.save()
        self.bar.close()
        raise Interrupted(self.at)
    self.drain()
    self.bar.close()
    return self.result(time.perf_counter() - t0 - self.save_s)

  def result(self, train_s: float) -> GroupResult:
    if self.schedule.checks:  # every model's results were kept when it stopped
      res = self.done
      frozen = np.asarray([self.st.reason_of(i) == "frozen" for i in range(self.n)])
    else:
      back = self.prog.back
      res = program.take(jax.device_get(self.evaluate(self.state.params, self.arch,
                                                      self.held)), back)
      res = program.real_models(res, self.n)
      frozen = program.take(np.asarray(self.state.frozen), back)[:self.n]
    return rows_of(self, res, frozen, train_s, full_length_acc(self))

