"""Trackers: offline W&B runs with deterministic ids that a rerun resumes, a disabled
mode that writes nothing, credential-free mode detection, and plain JSON lines."""
import json
import math
import re
import statistics
import time

import numpy as np
import pytest

from depthscale.io import trackers

SWEEP = "test-sweep"
MODELS = ["n8-d1-w16-h2-lr0.001-s0", "n8-d2-w16-h2-lr0.001-s0", "n8-d4-w32-h4-lr0.001-s1"]


@pytest.fixture
def offline(monkeypatch, tmp_path):
  monkeypatch.setenv("WANDB_MODE", "offline")
  monkeypatch.setenv("WANDB_SILENT", "true")
  monkeypatch.setenv("WANDB_DIR", str(tmp_path))
  monkeypatch.delenv("WANDB_API_KEY", raising=False)
  return tmp_path


def _row(i: int) -> dict:
  return dict(task="khop", depth=i + 1, width=16, heads=2, seed=0, lr=1e-3, length=8,
              repeats=1, n_star=np.int64(3 + i), final_loss=0.1 * (i + 1),
              eval_loss=float("nan") if i == 2 else 0.2, seq_acc=np.float32(0.5),
              steps=100, frozen=False, train_s=1.5)


def _curves(n: int = 20) -> dict:
  return {"step": list(range(0, 10 * n, 10)), "loss": [1.0 / (s + 1) for s in range(n)],
          "acc": [s / n for s in range(n)]}


def _config(row: dict) -> dict:
  return {k: row[k] for k in ("task", "depth", "width", "heads", "seed", "lr", "length")}


def _summary(row: dict) -> dict:
  return {k: row[k] for k in ("n_star", "final_loss", "eval_loss", "seq_acc", "steps")}


def _log_all(tracker, tmp_path):
  for i, m in enumerate(MODELS):
    tracker.log_model(m, _config(_row(i)), _curves(), _summary(_row(i)))
  png = tmp_path / "plot.png"
  import PIL.Image  # pylint: disable=import-outside-toplevel
  PIL.Image.new("RGB", (8, 8), "white").save(png)
  rows = [_row(i) for i in range(len(MODELS))]
  tracker.log_summary(rows, {"n_star_vs_depth": png}, {"depth": {"slope": 1.1, "r2": 0.9}})


def _offline_ids(tmp_path) -> list[str]:
  """Run ids of the offline run directories, one entry per directory."""
  ids = []
  for d in sorted((tmp_path / "wandb").glob("offline-run-*")):
    m = re.fullmatch(r"offline-run-\d{8}_\d{6}-([0-9a-f]+)(-\d+)?", d.name)
    assert m, d.name
    assert (d / f"run-{m.group(1)}.wandb").stat().st_size > 0
    ids.append(m.group(1))
  return ids


def test_run_ids_are_deterministic_and_distinct():
  ids = {trackers.run_id(SWEEP, m) for m in MODELS} | {trackers.run_id(SWEEP)}
  assert len(ids) == len(MODELS) + 1
  assert trackers.run_id(SWEEP, MODELS[0]) == trackers.run_id(SWEEP, MODELS[0])
  assert trackers.run_id("other", MODELS[0]) != trackers.run_id(SWEEP, MODELS[0])
  assert trackers.run_id(SWEEP, "summary") != trackers.run_id(SWEEP)
  assert all(re.fullmatch(r"[0-9a-f]{16}", i) for i in ids)


def test_offline_runs_have_deterministic_ids_and_resume(offline):
  tracker = trackers.WandbTracker(offline, SWEEP)
  assert tracker.mode == "offline"
  _log_all(tracker, offline)
  expected = {trackers.run_id(SWEEP, m) for m in MODELS} | {trackers.run_id(SWEEP)}
  ids = _offline_ids(offline)
  assert len(ids) == 4 and set(ids) == expected
  assert set(tracker.run_ids.values()) == expected
  assert tracker.seconds > 0
  data = next((offline / "wandb").glob(f"offline-run-*-{trackers.run_id(SWEEP, MODELS[1])}"))
  raw = (data / f"run-{trackers.run_id(SWEEP, MODELS[1])}.wandb").read_bytes()
  for key in (b"loss", b"acc", b"n_star", b"depth", SWEEP.encode()):
    assert key in raw

  # A rerun of one model (a new tracker, as after a restart) reuses its id.
  again = trackers.WandbTracker(offline, SWEEP)
  again.log_model(MODELS[0], _config(_row(0)), _curves(), _summary(_row(0)))
  assert set(_offline_ids(offline)) == expected


def test_disabled_writes_nothing(monkeypatch, tmp_path):
  monkeypatch.setenv("WANDB_MODE", "disabled")
  monkeypatch.setenv("WANDB_DIR", str(tmp_path))
  tracker = trackers.WandbTracker(tmp_path / "work", SWEEP)
  assert tracker.mode == "disabled"
  _log_all(tracker, tmp_path)
  assert sorted(p.name for p in tmp_path.iterdir()) == ["plot.png"]


def test_wandb_mode_without_credentials_is_offline(monkeypatch, tmp_path):
  for var in ("WANDB_MODE", "WANDB_API_KEY", "WANDB_IDENTITY_TOKEN_FILE", "WANDB_DISABLED",
              "WANDB_BASE_URL", "NETRC"):
    monkeypatch.delenv(var, raising=False)
  monkeypatch.setenv("HOME", str(tmp_path))
  assert trackers.wandb_mode() == "offline"
  netrc = tmp_path / ".netrc"
  netrc.write_text("machine example.com login user password secret\n")
  assert trackers.wandb_mode() == "offline"
  netrc.write_text("machine api.wandb.ai login user password " + "k" * 40 + "\n")
  assert trackers.wandb_mode() == "online"
  netrc.unlink()
  monkeypatch.setenv("WANDB_API_KEY", "k" * 40)
  assert trackers.wandb_mode() == "online"
  for mode in trackers.MODES:
    monkeypatch.setenv("WANDB_MODE", mode)
    assert trackers.wandb_mode() == mode
  monkeypatch.setenv("WANDB_MODE", "dryrun")
  assert trackers.wandb_mode() == "offline"
  monkeypatch.setenv("WANDB_MODE", "bogus")
  with pytest.raises(ValueError):
    trackers.wandb_mode()


def test_jsonl_lines_parse_and_carry_n_star(tmp_path):
  tracker = trackers.JsonlTracker(tmp_path)
  _log_all(tracker, tmp_path)
  lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
  records = [json.loads(line) for line in lines]  # strict: no NaN literals
  assert [r["kind"] for r in records] == ["model"] * 3 + ["summary"]
  assert [r["n_star"] for r in records[:3]] == [3, 4, 5]
  assert records[2]["eval_loss"] is None and records[0]["curves"]["step"][:2] == [0, 10]
  assert [r["n_star"] for r in records[3]["rows"]] == [3, 4, 5]
  assert records[3]["fits"]["depth"]["slope"] == 1.1
  assert tracker.seconds > 0


def test_offline_log_model_cost(offline, capsys):
  """Per-run cost after wandb's service is up; hundreds of models must stay cheap."""
  tracker = trackers.WandbTracker(offline, "cost-sweep")
  times = []
  for i in range(6):
    start = time.perf_counter()
    tracker.log_model(f"m{i}", _config(_row(0)), _curves(200), _summary(_row(0)))
    times.append(time.perf_counter() - start)
  median = statistics.median(times[1:])  # the first may start the service
  with capsys.disabled():
    print(f"\noffline log_model: first {times[0]:.3f}s, median {median:.3f}s")
  assert math.isclose(tracker.seconds, sum(times), rel_tol=0.05)
  assert median < 2.0


def test_max_points_subsamples_evenly_keeping_ends():
  assert trackers._subsample(10, 4) == [0, 3, 6, 9]  # pylint: disable=protected-access
  assert trackers._subsample(3, 4) == [0, 1, 2]  # pylint: disable=protected-access
  assert len(trackers._subsample(1000, 500)) == 500  # pylint: disable=protected-access
  with pytest.raises(ValueError):
    trackers.WandbTracker(".", SWEEP, mode="offline", max_points=1)


def test_live_curves_follow_each_model_on_its_own_steps():
  """A queued model entered late: its W&B curve gets its own steps as it trains them,
  each once, never the group's steps nor the empty ones."""
  import numpy as np
  from depthscale.core.ensemble import ModelSpec
  from depthscale.sweep import plan, tracking
  from depthscale.sweep.grid import Cell

  class Fake:
    def __init__(self):
      self.got = {}

    def log_model(self, key, conf, curves, summary):
      self.got.setdefault(key, []).extend(zip(curves["step"], curves["loss"]))

  g = plan.Group((Cell(ModelSpec(1, 16, 2, seed=0), 8), Cell(ModelSpec(1, 16, 2, seed=1), 8)), 8)
  fake = Fake()
  live = tracking.LiveCurves(fake, g, log_every=10)
  curves = {k: np.full((50, 2), np.nan, np.float32) for k in ("loss", "lr")}
  curves["loss"][:, 0], curves["lr"][:, 0] = np.arange(50), 1e-3  # model 0: its budget
  curves["loss"][:15, 1], curves["lr"][:15, 1] = 100 + np.arange(15), 1e-3  # entered at 35
  live(50, curves)
  curves["loss"][15:40, 1], curves["lr"][15:40, 1] = 115 + np.arange(25), 1e-3
  live(75, curves)  # the group ran past model 0's budget; model 1 is at its own step 40
  first, second = (fake.got[c.key] for c in g.cells)
  assert first == [(t, t - 1) for t in (10, 20, 30, 40, 50)]
  assert second == [(t, 100 + t - 1) for t in (10, 20, 30, 40)]


QUICK_SMOKE = ["--config", "experiments/quickstart.py:smoke", "--no-progress",
               "--config.train.steps=40", "--config.train.steps_per_call=20",
               "--config.checkpoint_every=20"]


def test_a_failing_tracker_never_costs_a_trained_group(tmp_path, monkeypatch, capsys):
  """W&B online but every run's start failing (not logged in, unreachable): the study
  trains and writes every group, results.csv and the report; the failure is one line,
  and W&B is tried once, not once per model and checkpoint."""
  from depthscale import cli
  calls = []

  def unreachable(self, *a, **k):
    calls.append(a)
    raise RuntimeError("CommError: Timed out while retrying: connection refused")
  monkeypatch.setattr(trackers.WandbTracker, "_init", unreachable)
  w = tmp_path / "w"
  capsys.readouterr()
  assert cli.main(["run", *QUICK_SMOKE, "--config.wandb.mode=online", "--workdir",
                   str(w)]) == 0
  err = capsys.readouterr().err
  said = [l for l in err.splitlines() if "W&B tracking failed" in l]
  assert len(said) == 1 and "connection refused" in said[0] and "Traceback" not in err, err
  assert len(calls) == 1
  with open(w / "results.csv") as f:
    assert len(f.read().strip().splitlines()) == 1 + 6
  assert (w / "report.md").exists() and len(list((w / "groups").glob("*.json"))) == 1


@pytest.mark.slow
def test_wandb_online_and_unreachable_is_bounded_in_time(tmp_path):
  """The real wandb, online with a key but its server unreachable (a closed port): the
  run's start gives up after DEPTHSCALE_WANDB_INIT_TIMEOUT once, then the study trains and
  writes its results as if tracking were off."""
  import os
  import subprocess
  import sys
  from conftest import ROOT
  env = dict(os.environ, WANDB_MODE="online", WANDB_API_KEY="x" * 40,
             WANDB_BASE_URL="http://127.0.0.1:9", DEPTHSCALE_WANDB_INIT_TIMEOUT="3")
  env.pop("WANDB_SILENT", None)
  t0 = time.perf_counter()
  p = subprocess.run([sys.executable, "-m", "depthscale.cli", "run", *QUICK_SMOKE,
                      "--workdir", str(tmp_path / "w")], cwd=ROOT, env=env,
                     capture_output=True, text=True, timeout=600)
  wall = time.perf_counter() - t0
  assert p.returncode == 0, p.stderr[-3000:]
  assert p.stderr.count("W&B tracking failed") == 1, p.stderr[-3000:]
  with open(tmp_path / "w" / "results.csv") as f:
    assert len(f.read().strip().splitlines()) == 1 + 6
  spent = float(re.search(r"W&B \(online\) logging took ([\d.]+) s", p.stderr).group(1))
  print(f"wall {wall:.1f} s, of which W&B {spent:.1f} s (one start, 3 s timeout)")
  assert 2.5 < spent < 10, p.stderr[-2000:]  # tried once: not once per model or checkpoint
