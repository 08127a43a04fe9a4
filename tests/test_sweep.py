"""Sweeps end to end on a smoke config: outputs consistent, resumable after kill -9,
bad configs refused in one line before compiling, a workdir never overwritten."""
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT, SPLIT_SMOKE, read_rows
from depthscale import config
from depthscale.cli import main as cli_main
from depthscale.sweep import study as study_lib

SMOKE = "experiments/quickstart.py:smoke"


def cli(*args, **kw):
  env = dict(os.environ, WANDB_MODE="offline", WANDB_SILENT="true")
  return subprocess.Popen([sys.executable, "-m", "depthscale.cli", *args], cwd=ROOT,
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          **kw)


def run_to_end(workdir, *extra):
  p = cli("run", *SPLIT_SMOKE, "--workdir", str(workdir), *extra)
  out, err = p.communicate(timeout=600)
  assert p.returncode == 0, err[-2000:]
  return out, err


def checkpoint_steps(workdir):
  base = os.path.join(workdir, "checkpoints")
  steps = []
  for root, dirs, _ in os.walk(base):
    steps += [int(d) for d in dirs if d.isdigit()]
  return steps


@pytest.mark.optimized  # SPLIT_SMOKE, as the reference run (conftest)
@pytest.mark.slow
def test_smoke_sweep_outputs_and_resume_after_kill9(tmp_path, reference_run):
  ref, _ = reference_run
  c = config.load(SMOKE)
  n_models = len(c.grid.depth) * len(c.grid.width) * len(c.grid.seed) * len(c.grid.lr)
  rows = read_rows(ref)
  assert len(rows) == n_models >= 6 and len({r["depth"] for r in rows}) >= 2
  for name in ("fits.json", "report.md", "config.json"):
    assert (ref / name).exists(), name
  runs = [d for d in os.listdir(ref / "wandb") if d.startswith("offline-run-")]
  # one run id per model + the summary run (a run logged several times, live at each
  # checkpoint, has several offline directories: offline-run-DATE_TIME-ID[-k])
  ids = {re.match(r"offline-run-\d{8}_\d{6}-([0-9a-f]{16})", d).group(1) for d in runs}
  assert len(ids) == n_models + 1
  fits = json.loads((ref / "fits.json").read_text())
  best = fits["fits"]["depth_vs_log2_nstar"]["best"]
  assert len(best["points"]) == len(c.grid.depth)  # the fit is of these rows
  for p in best["points"]:
    assert p["n_star"] == max(int(r["n_star"]) for r in rows if int(r["depth"]) == p["depth"])
  # k-hop with k per sequence: k* is the last k before the per-k accuracy first drops
  for r in rows:
    acc = [float(a) for a in r["level_acc"].split()]  # printed to 3 decimals
    assert len(acc) == c.task_options.k_max + 1
    if any(abs(a - c.eval.threshold) < 1e-3 for a in acc):
      continue  # too close to the threshold to judge from the rounded figures
    below = [k for k, a in enumerate(acc) if a < c.eval.threshold]
    assert int(r["k_star"]) == (below[0] - 1 if below else len(acc) - 1)
  assert "## Hardest level solved" in (ref / "report.md").read_text()

  # kill -9 at two points, rerun, and compare with the uninterrupted run
  got = tmp_path / "got"
  for wait_for in (60, 120):
    p = cli("run", *SPLIT_SMOKE, "--workdir", str(got))
    deadline = time.time() + 300
    while max(checkpoint_steps(got) or [0]) < wait_for and p.poll() is None:
      assert time.time() < deadline
      time.sleep(0.2)
    p.send_signal(signal.SIGKILL)
    p.communicate()
  run_to_end(got)
  assert read_rows(got) == rows
  for gid in os.listdir(ref / "groups"):
    a = json.loads((ref / "groups" / gid).read_text())
    b = json.loads((got / "groups" / gid).read_text())
    assert a["curves"] == b["curves"] and a["per_position_acc"] == b["per_position_acc"]


BAD = [("--config.grid.depth=[0, 2]", "grid.depth"),
       ("--config.grid.width=[31]", "grid.width"),
       ("--config.task=nope", "task"),
       ("--config.train.steps=-5", "train.steps"),
       ("--config.grid.seed=[]", "grid.seed"),
       ("--config.grid.lr=['fast']", "grid.lr"),
       ("--config.train.batch_size=0", "train.batch_size"),
       ("--config.model.pos=alibi", "model.pos"),
       ("--config.nonexistent=3", "nonexistent")]


@pytest.mark.parametrize("override,field", BAD)
def test_bad_config_is_one_line_naming_the_field(tmp_path, capfd, monkeypatch, override, field):
  """In this process, every byte written to its stdout and stderr captured: `run` refuses
  before JAX, the devices or the workdir are touched (the exit status from a shell, and a
  process's whole stderr: tests/test_cli.py's user errors)."""
  monkeypatch.setenv("WANDB_MODE", "disabled")
  rc = cli_main(["run", "--config", SMOKE, "--workdir", str(tmp_path / "w"), override])
  out, err = capfd.readouterr()
  assert rc == 2 and out == ""
  lines = err.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith("depthscale: error:") and field in lines[0]
  assert "Traceback" not in err
  assert not (tmp_path / "w").exists()  # refused before anything was written


def test_workdir_with_a_different_study_is_refused(tmp_path):
  c = config.load(SMOKE)
  study_lib.claim_workdir(study_lib.resolve(c), str(tmp_path))
  before = (tmp_path / "config.json").read_text()
  c.grid.depth = [1, 5]
  with pytest.raises(config.ConfigError, match="grid"):
    study_lib.claim_workdir(study_lib.resolve(c), str(tmp_path))
  assert (tmp_path / "config.json").read_text() == before
  c2 = config.load(SMOKE, ["wandb.mode=disabled"])  # not part of the study's identity
  study_lib.claim_workdir(study_lib.resolve(c2), str(tmp_path))
