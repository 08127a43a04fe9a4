"""Shared test settings and fixtures.

Numpy-style rank promotion is an error (as in nanodo); `reference_run` is one uninterrupted
single-process run of the quickstart smoke study split into 2 groups, which the
multi-process, concurrent-launch and SLURM tests compare against.
"""
import csv
import fcntl
import os
import subprocess
import sys

import jax
import pytest

jax.config.update("jax_numpy_rank_promotion", "raise")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPLIT_SMOKE = ["--config", "experiments/quickstart.py:smoke", "--no-progress",
               "--config.plan.max_models_per_group=3",  # 2 groups of 3 models
               "--config.train.steps=180"]  # checkpoints at 60 and 120


def read_rows(workdir):
  """results.csv without the timing columns (those ending in _s)."""
  with open(os.path.join(workdir, "results.csv")) as f:
    return [{k: v for k, v in r.items() if not k.endswith("_s")} for r in csv.DictReader(f)]


@pytest.fixture(scope="session")
def reference_run(tmp_path_factory):
  """(workdir, stderr) of the reference run; made once per test session, also when
  pytest-xdist workers share the session (the first to take the lock runs it)."""
  root = tmp_path_factory.getbasetemp()
  if os.environ.get("PYTEST_XDIST_WORKER"):
    root = root.parent  # the directory all workers of this session share
  workdir, log = root / "reference", root / "reference.stderr"
  with open(root / "reference.lock", "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    if not log.exists():
      env = dict(os.environ, WANDB_MODE="offline", WANDB_SILENT="true")
      p = subprocess.run([sys.executable, "-m", "depthscale.cli", "run", *SPLIT_SMOKE,
                          "--workdir", str(workdir)], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=900)
      assert p.returncode == 0, p.stderr[-2000:]
      log.write_text(p.stderr)
  return workdir, log.read_text()


def pytest_collection_modifyitems(config, items):
  """The slow end-to-end tests first, so that two xdist workers start them at once and
  the short tests fill in around them (instead of a long test starting last)."""
  items.sort(key=lambda item: item.get_closest_marker("slow") is None)
