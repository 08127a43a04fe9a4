"""The schedules' decisions (sweep/schedules/), by hand and without compiling anything: a
refill (padded, and compacted by slot shape), a rebuild decision, a halving rung, and a
slot table saved and restored. Every test checks that JAX compiled nothing."""
import jax
import numpy as np
import pytest

from depthscale.core import stopping
from depthscale.core.ensemble import ModelSpec
from depthscale.sweep import schedules, slots as slots_lib
from depthscale.sweep.schedules import Halving, Queue, Static

COMPILES = []
jax.monitoring.register_event_duration_secs_listener(
    lambda event, _secs, **_: COMPILES.append(event)
    if event == "/jax/core/compile/backend_compile_duration" else None)
COUNTED = 8  # counted positions of the held-out rows below


@pytest.fixture(autouse=True)
def nothing_compiles():
  before = len(COMPILES)
  yield
  assert len(COMPILES) == before, "a schedule's decision compiled a program"


def row(solved_positions: int, loss: float = 1.0) -> dict:
  return {"n_star": solved_positions, "seq_acc": solved_positions / COUNTED, "eval_loss": loss}


def test_choose_picks_the_schedule_from_the_rule_and_slots():
  specs = [ModelSpec(1, 16, 2, seed=s) for s in range(4)]
  assert isinstance(schedules.choose(specs, 40, "pad", 10), Static)
  assert isinstance(schedules.choose(specs, 40, "pad", 10, stopping.Rule("none", 10)), Static)
  q = schedules.choose(specs, 40, "pad", 10, slots=2)  # fewer slots: a queue, rule none
  assert isinstance(q, Queue) and q.queue and q.rule.kind == "none" and q.every == 10
  s = schedules.choose(specs, 40, "pad", 10, stopping.Rule("solved", every=20))
  assert isinstance(s, Queue) and not s.queue and s.every == 20 and s.rule.budget == 40
  lrs = [ModelSpec(1, 16, 2, lr=lr) for lr in (1e-3, 3e-3, 1e-2)]
  assert isinstance(schedules.choose(lrs, 60, "pad", 10, stopping.Rule("halving", 10)), Halving)


def test_a_solved_model_leaves_its_slot_and_the_next_queued_model_takes_it():
  specs = [ModelSpec(1, 16, 2, seed=s) for s in range(4)]
  q = Queue(specs, 40, "pad", stopping.Rule("solved", every=10), slots=2)
  assert q.first() == [0, 1]
  table = slots_lib.SlotTable.start(np.arange(2), q.first(), 4)
  st = stopping.StopState.fresh(4)
  now = q.stops(st, 10, table, [row(COUNTED), row(3)], np.zeros(2, bool), "n_star", COUNTED)
  assert now == [0] and st.stopped_at[0] == 10 and st.reason_of(0) == "solved"
  assert st.stopped_at[1] == -1 and st.best[1] == pytest.approx(3 / COUNTED)
  table.holder[table.slot_of(0)] = slots_lib.IDLE
  assert q.enters(st, 10, table, [(), ()], [()] * 4) == {0: 2}  # the first queued model
  assert q.training(st, 10, table)


def test_a_compacted_refill_takes_a_model_of_the_freed_slots_depth():
  specs = [ModelSpec(d, 16, 2, seed=s) for s in (0, 1) for d in (1, 2)]  # depths 1 2 1 2
  q = Queue(specs, 40, "compact", stopping.Rule("plateau", every=10, patience=1), slots=2)
  assert q.first() == [0, 1]  # one slot per depth present
  table = slots_lib.SlotTable.start(np.arange(2), q.first(), 4)
  st = stopping.StopState.fresh(4)
  st.best[:] = 0.5  # both at their best so far; no improvement now: plateau (patience 1)
  now = q.stops(st, 20, table, [row(2), row(6)], np.zeros(2, bool), "n_star", COUNTED)
  assert now == [0] and st.reason_of(0) == "plateau"
  table.holder[0] = slots_lib.IDLE
  shapes = [slots_lib.slot_shape(s, "compact") for s in specs]
  assert q.enters(st, 20, table, [(1, 1), (2, 1)], shapes) == {0: 2}  # depth 1, not model 3


def test_a_model_at_its_budget_or_frozen_stops_whatever_the_rule():
  specs = [ModelSpec(1, 16, 2, seed=s) for s in range(2)]
  q = Queue(specs, 40, "pad", stopping.Rule("plateau", every=10, patience=99))
  table = slots_lib.SlotTable.start(np.arange(2), q.first(), 2)
  st = stopping.StopState.fresh(2)
  assert q.stops(st, 30, table, [row(1), row(1)], np.array([False, True]), "n_star",
                 COUNTED) == [1]
  assert st.reason_of(1) == "frozen"
  table.holder[1] = slots_lib.IDLE  # its slot freed
  assert q.stops(st, 40, table, [row(2), row(1)], np.zeros(2, bool), "n_star", COUNTED) == [0]
  assert st.reason_of(0) == "budget" and st.stopped_at[0] == 40


def test_a_rebuild_pays_only_when_the_idle_cost_over_the_steps_left_exceeds_a_compile():
  specs = [ModelSpec(2, 16, 2), ModelSpec(1, 16, 2)]  # compacted slot costs: 3 and 2
  holder = np.array([0, slots_lib.IDLE])  # the depth-1 model stopped; nothing queued
  table = slots_lib.SlotTable(holder=holder, entered=np.array([0, 0]))
  st = stopping.StopState.fresh(2)
  st.stopped_at[1] = 10
  q = Queue(specs, 1000, "compact", stopping.Rule("solved", every=10), rebuild_steps=30)
  # idle share 2/5 of the program: over 100 steps left that is 40 steps >= 30: rebuild
  assert q.rebuild(st, 10, table, specs, 1, steps_left=100) == [0]
  assert q.rebuild(st, 10, table, specs, 1, steps_left=50) is None  # 20 < 30
  never = Queue(specs, 1000, "compact", stopping.Rule("solved", every=10))
  assert never.rebuild(st, 10, table, specs, 1, steps_left=10**6) is None
  pad = Queue(specs, 1000, "pad", stopping.Rule("solved", every=10), rebuild_steps=30)
  assert pad.rebuild(st, 10, table, specs, 1, steps_left=100) == [0]  # 1/2 x 100 = 50


def test_a_halving_rung_keeps_the_best_learning_rate_and_its_other_seeds_wait_for_it():
  lrs = (1e-3, 3e-3, 1e-2)
  specs = [ModelSpec(1, 16, 2, seed=s, lr=lr) for s in (0, 1) for lr in lrs]
  h = Halving(specs, 60, "pad", stopping.Rule("halving", every=10, eta=3))
  assert h.first() == [0, 1, 2] and h.queue and h.ladder.rungs == [20]
  table = slots_lib.SlotTable.start(np.arange(3), h.first(), 6)
  st = stopping.StopState.fresh(6)
  rows = [row(2), row(5), row(1)]  # the scout of lr 3e-3 is best
  assert h.stops(st, 10, table, rows, np.zeros(3, bool), "n_star", COUNTED) == []  # no rung
  assert not h.may_enter(st, 4, 10)  # before the last rung no other seed enters
  now = h.stops(st, 20, table, rows, np.zeros(3, bool), "n_star", COUNTED)
  assert sorted(now) == [0, 2]
  assert [st.reason_of(i) for i in range(6)] == ["halved", "running", "halved",
                                                 "halved", "running", "halved"]
  assert st.stopped_at[3] == 0 and st.stopped_at[0] == 20  # a queued seed never trains
  for i in now:
    table.holder[table.slot_of(i)] = slots_lib.IDLE
  assert h.enters(st, 20, table, [()] * 3, [()] * 6) == {0: 4}  # the survivor's seed 1
  assert h.training(st, 20, table)


def test_a_queue_restores_its_saved_slot_table_and_programs_models():
  specs = [ModelSpec(1, 16, 2, seed=s) for s in range(5)]
  q = Queue(specs, 40, "pad", stopping.Rule("solved", every=10), slots=3, rebuild_steps=1)
  table = slots_lib.SlotTable(holder=np.array([4, slots_lib.IDLE]),
                              entered=np.array([0, 0, 0, 10, 20]))
  saved = q.fields(table, [4, 3], size=3)  # rebuilt to 2 slots; saved at the first size
  assert list(saved["table"]["holder"]) == [4, slots_lib.IDLE, slots_lib.PAST]
  assert list(saved["built"]) == [4, 3, -1]
  back, built = q.restore(saved)
  assert built == [4, 3]
  assert list(back.holder) == [4, slots_lib.IDLE] and list(back.entered) == [0, 0, 0, 10, 20]
  assert list(back.queued) == [] and back.slot_of(4) == 0
  assert Static(specs, 40, "pad").restore({}) == (None, None)  # static: as built
