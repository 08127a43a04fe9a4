"""Leases: one holder per group, takeover only after the heartbeat lapses, the old holder
notices, and no flock anywhere (works where flock fails); `depthscale status`."""
import fcntl
import json
import os
import time

import numpy as np
import pytest

from depthscale import config
from conftest import planned
from depthscale.io import leases
from depthscale.io import workdir as workdir_lib
from depthscale.io.leases import Lease, LeaseLost
from depthscale.sweep import plan, status, study as study_lib

SMOKE = "experiments/quickstart.py:smoke"


def age(lease: Lease, seconds: float) -> None:
  """Backdate a lease's heartbeat, as if its holder had stopped renewing."""
  with open(lease.path) as f:
    rec = json.load(f)
  rec["heartbeat"] -= seconds
  with open(lease.path, "w") as f:
    json.dump(rec, f)


def test_one_holder_until_the_heartbeat_lapses(tmp_path):
  a, b = Lease(str(tmp_path), "g", lease_s=60), Lease(str(tmp_path), "g", lease_s=60)
  assert a.acquire() and not b.acquire()
  a.check()  # renews
  age(a, 30)
  assert not b.acquire()  # 30 s old: still held
  age(a, 40)
  assert b.acquire() and b.took_over["owner"] == a.owner and b.generation == 2
  with pytest.raises(LeaseLost):
    a.check()  # the old holder notices before its next write
  a.release()  # does not touch b's lease
  assert leases.state(leases.latest(str(tmp_path), "g")[1], 60) == "held"
  b.release()
  c = Lease(str(tmp_path), "g", lease_s=60)
  assert c.acquire() and c.took_over is None  # released: free at once, no wait


def test_two_takers_of_a_stale_lease_one_wins(tmp_path, monkeypatch):
  a = Lease(str(tmp_path), "g", lease_s=5)
  assert a.acquire()
  age(a, 10)
  seen = leases.latest(str(tmp_path), "g")
  monkeypatch.setattr(leases, "latest", lambda *_: seen)  # both read generation 1 first
  takers = [Lease(str(tmp_path), "g", lease_s=5) for _ in range(2)]
  got = [t.acquire() for t in takers]
  assert got == [True, False]
  assert leases.generations(str(tmp_path), "g") == [1, 2]


def test_heartbeat_thread_renews_and_stops_when_released(tmp_path):
  a = Lease(str(tmp_path), "g", lease_s=2.0)
  assert a.acquire()
  a.start()
  time.sleep(3.0)  # > lease_s: only the thread's renewals (every 0.5 s) keep it fresh
  assert not Lease(str(tmp_path), "g", lease_s=2.0).acquire()
  a.update(step=120, total_steps=300, steps_per_s=50.0)
  time.sleep(1.5)
  rec = leases.latest(str(tmp_path), "g")[1]
  assert rec["step"] == 120 and rec["steps_per_s"] == 50.0
  a.release()
  assert leases.latest(str(tmp_path), "g")[1]["released"]


def test_a_crash_between_create_and_write_lapses_by_mtime(tmp_path):
  os.makedirs(tmp_path / "leases")
  (tmp_path / "leases" / "g.1").write_text("")  # created, never written
  assert not Lease(str(tmp_path), "g", lease_s=5).acquire()
  old = time.time() - 10
  os.utime(tmp_path / "leases" / "g.1", (old, old))
  assert Lease(str(tmp_path), "g", lease_s=5).acquire()


def test_leases_work_where_flock_fails(tmp_path, monkeypatch):
  """Lustre with localflock, BeeGFS, NFS without lockd: flock raises or is node-local."""
  def no_flock(*_):
    raise OSError(38, "Function not implemented")  # ENOSYS
  monkeypatch.setattr(fcntl, "flock", no_flock)
  monkeypatch.setattr(fcntl, "lockf", no_flock)
  monkeypatch.setattr(fcntl, "fcntl", no_flock)
  a, b = Lease(str(tmp_path), "g", lease_s=60), Lease(str(tmp_path), "g", lease_s=60)
  assert a.acquire() and not b.acquire()
  a.release()
  assert b.acquire()


def test_status_shows_done_running_stale_and_pending(tmp_path):
  c = config.load(SMOKE, ["plan.max_models_per_group=1", "lease_s=60.0"])
  study_lib.claim_workdir(study_lib.resolve(c), str(tmp_path))
  _, groups = planned(c)
  assert len(groups) >= 4
  done, running, stale, pending = [g.id for g in groups[:4]]
  (tmp_path / "plan.json").write_text(json.dumps({"groups": plan.to_json(groups)}))
  os.makedirs(os.path.dirname(workdir_lib.group_path(str(tmp_path), done)), exist_ok=True)
  open(workdir_lib.group_path(str(tmp_path), done), "w").write(json.dumps(
      {"rows": [{"model": x.key} for x in groups[0].cells], "format": workdir_lib.FORMAT}))
  r = Lease(str(tmp_path), running, lease_s=60)
  assert r.acquire()
  r.update(step=100, total_steps=c.train.steps, steps_per_s=20.0)
  r.check()
  s = Lease(str(tmp_path), stale, lease_s=60)
  assert s.acquire()
  age(s, 120)
  os.makedirs(tmp_path / "checkpoints" / pending / "60")
  rep = status.status(str(tmp_path))
  by_id = {g["id"]: g for g in rep["groups"]}
  assert by_id[done]["state"] == "done"
  assert by_id[running]["state"] == "running" and by_id[running]["step"] == 100
  assert by_id[running]["eta_s"] == pytest.approx((c.train.steps - 100) / 20.0)
  assert by_id[running]["host"] == os.uname().nodename and by_id[running]["lease_age_s"] < 30
  assert by_id[stale]["state"] == "stale" and by_id[stale]["lease_age_s"] >= 120
  assert by_id[pending]["state"] == "pending" and by_id[pending]["checkpoint_step"] == 60
  assert rep["counts"] == {"done": 1, "running": 1, "stale": 1,
                           "pending": len(groups) - 3}
  text = status.format_status(rep)
  assert "1 done, 1 running, 1 stale" in text and "ETA" in text and "resumes from step 60" in text


def test_a_dead_holder_on_this_host_is_stale_at_once(tmp_path):
  """kill -9, then rerun on the same host: no wait for lease_s."""
  import subprocess
  import sys
  child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
  a = Lease(str(tmp_path), "g", lease_s=600)
  assert a.acquire()
  rec = json.load(open(a.path))
  rec["pid"] = child.pid
  json.dump(rec, open(a.path, "w"))
  assert not Lease(str(tmp_path), "g", lease_s=600).acquire()  # alive: held
  child.kill()
  child.wait()
  b = Lease(str(tmp_path), "g", lease_s=600)
  assert b.acquire() and b.took_over["pid"] == child.pid


def test_a_heartbeat_from_the_future_is_not_held_forever(tmp_path):
  """A record whose heartbeat lies further ahead than lease_s (a damaged file, a clock set
  wrong) is stale, not held until that time comes."""
  a = Lease(str(tmp_path), "g", lease_s=60)
  assert a.acquire()
  rec = json.load(open(a.path))
  rec.update(heartbeat=time.time() + 10 * 365 * 86400, pid=None)
  json.dump(rec, open(a.path, "w"))
  assert leases.state(rec, 60) == "stale"
  assert leases.state(dict(rec, heartbeat=time.time() + 30), 60) == "held"  # skew < lease_s
  b = Lease(str(tmp_path), "g", lease_s=60)
  assert b.acquire() and b.took_over["heartbeat"] == rec["heartbeat"]


def test_status_of_a_queued_group_shows_its_slots_and_an_eta_from_observed_stops(tmp_path):
  from depthscale.core import stopping
  from depthscale.sweep import slots
  # 4 slots, 9 models; at group step 300: models 0 and 1 stopped at 100 and 200 (their
  # slots now hold 4 and 5, entered at 100 and 200), 2 and 3 still at their first slot,
  # 8 halved before it trained; 6 and 7 queued
  table = slots.SlotTable(holder=np.array([4, 5, 2, 3]), entered=np.array(
      [0, 0, 0, 0, 100, 200, -1, -1, -1]))
  st = stopping.StopState.fresh(9)
  st.stopped_at[[0, 1, 8]] = [100, 200, 0]
  got = slots.summary(table, st, at=300, budget=1000)
  # expected stops: a model at own step 200 (4) -> none stopped later: the budget, 800
  # left; at 100 (5) -> 200, 100 left; at 300 (2, 3) -> 700 each; a queued one: 150 each
  assert got == dict(slots=4, busy=4, queued=2, stopped=3,
                     steps_left=max(800, (800 + 100 + 700 + 700 + 2 * 150) / 4))
  c = config.load(SMOKE, ["lease_s=60.0"])
  study_lib.claim_workdir(study_lib.resolve(c), str(tmp_path))
  g = planned(c)[1][0]
  r = Lease(str(tmp_path), g.id, lease_s=60)
  assert r.acquire()
  r.update(step=300, total_steps=c.train.steps, steps_per_s=20.0, slots=got)
  rep = status.status(str(tmp_path))
  row = rep["groups"][0]
  assert row["slots"] == got and row["eta_s"] == pytest.approx(800 / 20.0)
  assert "slots 4/4 busy, 2 queued, 3 stopped" in status.format_status(rep)


def test_a_group_whose_checkpoints_cannot_open_releases_its_lease(tmp_path, monkeypatch):
  """runner.train_one failing before training (its checkpoint directory will not open):
  the error is raised as it was, and the lease is released, so a rerun takes the group at
  once (not after the lease lapses)."""
  import types
  from depthscale.sweep import runner

  def unopenable(directory):
    raise PermissionError(13, "Permission denied", directory)
  monkeypatch.setattr(runner, "GroupCheckpoints", unopenable)
  lease = Lease(str(tmp_path), "g", lease_s=60)
  assert lease.acquire()
  study = types.SimpleNamespace(config=None)
  with pytest.raises(PermissionError):
    runner.train_one(study, str(tmp_path), types.SimpleNamespace(id="g"), lease, [], None,
                     None, False)
  again = Lease(str(tmp_path), "g", lease_s=60)
  assert again.acquire() and again.took_over is None  # released: free at once
  again.release()
