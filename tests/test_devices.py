"""The models axis sharded over 4 forced CPU devices gives the results of 1 device, also
when the 4-device run resumes from a checkpoint written by the 1-device run.

In float64: the sharded program is exact, but XLA's CPU kernels for a batch of 1 model
and of several round differently in float32, and training amplifies that (BUILD_NOTES).
"""
import csv
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from conftest import xla_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(workdir, devices):
  env = xla_env(devices, WANDB_MODE="disabled")
  p = subprocess.run([sys.executable, "-m", "depthscale.cli", "run", "--config",
                      "experiments/quickstart.py:smoke", "--workdir", str(workdir),
                      "--no-progress", "--config.model.dtype=float64",
                      "--config.train.steps=60", "--config.checkpoint_every=20"], cwd=ROOT,
                     env=env, capture_output=True, text=True,
                     timeout=600)
  assert p.returncode == 0, p.stderr[-2000:]
  with open(os.path.join(workdir, "results.csv")) as f:
    return list(csv.DictReader(f)), p.stderr


@pytest.mark.slow
def test_four_devices_match_one(tmp_path):
  """The 1-device run checkpoints at steps 20 and 40 of 60; the 4-device run (6 models +
  2 filler copies: one group, so one slot of 4 devices, 2 models each) starts from a copy of that
  workdir without its results, so it resumes at step 40 on a different device count and
  trains the rest sharded."""
  one, _ = run(tmp_path / "one", 1)
  shutil.copytree(tmp_path / "one", tmp_path / "four",
                  ignore=shutil.ignore_patterns("groups", "results.csv", "report.md",
                                                "fits.json", "claims.json", "plots"))
  four, err = run(tmp_path / "four", 4)
  assert "resumes from its step-40 checkpoint" in err, err[-2000:]
  assert "unreadable" not in err
  assert [r["model"] for r in one] == [r["model"] for r in four] and len(one) == 6
  assert [r["n_star"] for r in one] == [r["n_star"] for r in four]
  for key in ("final_loss", "eval_loss"):
    a = np.array([float(r[key]) for r in one])
    b = np.array([float(r[key]) for r in four])
    np.testing.assert_allclose(b, a, rtol=1e-4)


@pytest.mark.optimized  # SPLIT_SMOKE, as the reference run (conftest)
@pytest.mark.slow
def test_three_model_groups_on_two_devices_train_no_filler(tmp_path, reference_run):
  """2 forced devices, the reference run's two 3-model groups (length 16, 60 steps): the
  devices are dealt into 2 one-device shares that train the groups side by side, no
  filler copy anywhere (a share of 2 would pad each group to 4 models). The groups are
  the 1-device reference run's (same ids; its learning rate is constant, so its first 60
  steps are these): their loss curves agree, tightly at step 10 and within float32 drift
  by step 60 (CPU kernels round differently with several host devices than with 1, and
  training amplifies it: module docstring). plan.share_size's choice for 4 devices is
  tested without a process in tests/test_plan.py."""
  from conftest import SPLIT_SMOKE
  from depthscale.io import workdir as workdir_lib
  ref_dir, _ = reference_run
  env = xla_env(2, WANDB_MODE="disabled")
  p = subprocess.run([sys.executable, "-m", "depthscale.cli", "run", *SPLIT_SMOKE,
                      "--config.train.steps=60", "--config.checkpoint_every=60",
                      "--workdir", str(tmp_path / "w")],
                     cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
  assert p.returncode == 0, p.stderr[-2000:]
  assert "2 shares of 1 devices side by side" in p.stderr
  with open(tmp_path / "w" / "results.csv") as f:
    rows = list(csv.DictReader(f))
  assert len(rows) == 6 and {r["devices"] for r in rows} == {"1"}
  assert {r["models_in_program"] for r in rows} == {"3"}  # 3 real models, no copy
  ref, got = workdir_lib.read_groups(ref_dir)[0], workdir_lib.read_groups(tmp_path / "w")[0]
  assert len(ref) == 2 and set(ref) == set(got)
  for gid in ref:
    a = np.asarray(got[gid]["curves"]["loss"])     # [models, 6]: steps 10, 20, ..., 60
    b = np.asarray(ref[gid]["curves"]["loss"])[:, :6]
    assert got[gid]["curves"]["step"] == ref[gid]["curves"]["step"][:6]
    print(f"{gid}: step-10 rel diff {np.abs(a[:, 0] / b[:, 0] - 1).max():.2e}, step-60 "
          f"{np.abs(a[:, -1] / b[:, -1] - 1).max():.2e}")
    np.testing.assert_allclose(a[:, 0], b[:, 0], rtol=1e-5)  # measured: BUILD_NOTES
    np.testing.assert_allclose(a, b, rtol=1e-3)  # float32 drift by step 60
