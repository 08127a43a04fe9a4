"""Which model holds which slot of a group's program, and the queue behind them
(continuous batching, train.slots).

A group's program has m slots, in program order. Without a queue, slot j holds one model
for the whole run (spec order[j]; filler copies hold none). With a queue (fewer slots than
models), a model that stops leaves its slot, and the first queued model (in spec order)
of the same slot shape takes it, re-initialised in place: its own seed, learning rate,
data key and arch, a fresh optimizer state, step 0. Parameters, hyperparameters and arch
are data, so nothing recompiles. A slot with nothing left to take is idle (frozen: its
updates are masked). The table is plain arrays, checkpointed with the group.
"""
from __future__ import annotations

import dataclasses

import jax
import numpy as np

from depthscale.core import compiled, ensemble, train

IDLE = -1
PAST = -2  # a checkpointed holder beyond the current program's slots (sweep/resize.py)


@dataclasses.dataclass
class SlotTable:
  holder: np.ndarray    # [m] the spec index in each program slot, IDLE for none
  entered: np.ndarray   # [n] the group step at which each model took a slot, -1: queued

  @classmethod
  def start(cls, initial, chosen, n: int) -> "SlotTable":
    """Slot j holds spec chosen[initial[j]] (initial: the program's index into the models
    it was built with, `chosen`; beyond them a filler copy, which holds none); the other
    models of the n are queued."""
    holder = np.asarray([chosen[x] if x < len(chosen) else IDLE for x in initial], np.int64)
    entered = np.full(n, -1, np.int64)
    entered[holder[holder >= 0]] = 0
    return cls(holder=holder, entered=entered)

  def as_tree(self, size: int = 0) -> dict:
    """Plain arrays; the holder padded with PAST to `size` slots (a checkpoint keeps the
    first program's size when a rebuild made it smaller)."""
    pad = np.full(max(size - len(self.holder), 0), PAST, np.int64)
    return dict(holder=np.concatenate([self.holder, pad]), entered=self.entered)

  @classmethod
  def from_tree(cls, tree: dict) -> "SlotTable":
    holder = np.asarray(tree["holder"], np.int64)
    return cls(holder=holder[holder != PAST], entered=np.asarray(tree["entered"], np.int64))

  @property
  def queued(self) -> np.ndarray:
    return np.nonzero(self.entered < 0)[0]

  def slot_of(self, i: int) -> int:
    return int(np.nonzero(self.holder == i)[0][0])

  def next_for(self, shape, shapes, ok=lambda i: True) -> int | None:
    """The first queued model whose slot shape is `shape` and that may enter now
    (`ok`); None: no such model."""
    for i in self.queued:
      if shapes[i] == shape and ok(int(i)):
        return int(i)
    return None


def first_models(specs, n_slots: int, layout: str) -> list[int]:
  """The models that start in the n_slots slots: the first ones in spec order, except
  that in a compacted program every slot shape present must have a slot (a queued model
  only enters a slot of its shape): then the shapes take turns, in order of appearance."""
  if n_slots >= len(specs) or layout != "compact":
    return list(range(min(n_slots, len(specs))))
  by_shape: dict = {}
  for i, s in enumerate(specs):
    by_shape.setdefault(slot_shape(s, layout), []).append(i)
  if n_slots < len(by_shape):
    raise ValueError(f"{n_slots} slots cannot hold the {len(by_shape)} depths of a "
                     "compacted group (a queued model enters a slot of its own depth)")
  chosen, turn = [], 0
  while len(chosen) < n_slots:
    for idx in by_shape.values():
      if turn < len(idx) and len(chosen) < n_slots:
        chosen.append(idx[turn])
    turn += 1
  return sorted(chosen)


def holders_inputs(table: SlotTable, specs, cfg, hp, arch):
  """hp and arch of the models the (restored) table puts in each slot: the specs' own."""
  for j, i in enumerate(table.holder):
    if i >= 0:
      hp, arch = put_inputs(hp, arch, j, specs[i], cfg)
  return hp, arch


def slot_shape(spec, layout: str):
  """What a slot fixes about its model: in a compacted program its depth and repeats
  (the layer profile is static); in a padded one nothing (every slot has the padded
  shape)."""
  return (spec.depth, spec.repeats) if layout == "compact" else ()


def _put(tree, one, j: int):
  """tree with slot j of every leaf set to the one model of `one`."""
  return copy_rows(tree, one, [j], [0])


def copy_rows(new, old, to, src):
  """`new` with rows `to` of every leaf set to `old`'s rows `src`, on device (typed PRNG
  keys have no host array) and with new's shardings kept (the compiled program takes
  exactly these)."""
  moved = compiled.bounded(_copy_rows)(new, old, np.asarray(to), np.asarray(src))
  return jax.tree.map(lambda m, a: jax.device_put(m, a.sharding), moved, new)


@jax.jit
def _copy_rows(new, old, to, src):
  """One program for the whole tree (op by op, each leaf's shape compiled its own)."""
  return jax.tree.map(lambda a, b: a.at[to].set(b[src]), new, old)


def put_inputs(hp, arch, j: int, spec, cfg):
  """(hp, arch) with slot j holding `spec`'s hyperparameters and arch."""
  return (_put(hp, train.stack_hparams([spec]), j),
          _put(arch, ensemble.stack_arch([spec], cfg), j))


def put_model(state, hp, arch, j: int, spec, cfg, tcfg):
  """(state, hp, arch) with slot j re-initialised as `spec` at step 0."""
  one = train.init_state(ensemble.init_params([spec], cfg), tcfg)
  return (_put(state, one, j),) + put_inputs(hp, arch, j, spec, cfg)


def set_frozen(state, frozen_m):
  """state with its frozen flags set to the host array frozen_m (program order)."""
  return state.replace(frozen=jax.device_put(np.asarray(frozen_m), state.frozen.sharding))


def summary(table: SlotTable, st, at: int, budget: int) -> dict:
  """What `depthscale status` shows of a group with a stopping rule or a queue: its slots,
  how many hold a model, the models queued and stopped, and the program steps left as
  the stopping seen so far predicts them (a model at own step s runs to the mean stop
  step of the models that stopped after s, the budget if none did)."""
  stopped = st.stopped_at[st.stopped_at > 0]  # 0: halved before it trained

  def expect(s):
    later = stopped[stopped > s]
    return min(float(later.mean()) if later.size else float(budget), budget)

  own = [at - int(table.entered[i]) for i in table.holder if i >= 0]
  left = [max(expect(s) - s, 0.0) for s in own]
  waiting = [i for i in table.queued if st.stopped_at[i] < 0]
  work = sum(left) + len(waiting) * expect(0)
  return dict(slots=len(table.holder), busy=len(own), queued=len(waiting),
              stopped=int((st.stopped_at >= 0).sum()),
              steps_left=int(round(max(max(left, default=0.0), work / len(table.holder)))))
