"""Several launches on one workdir: two simultaneous launches never train a group twice,
and a corrupt latest checkpoint falls back."""
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT, SPLIT_SMOKE, read_rows as rows
from depthscale.io.checkpoint import GroupCheckpoints

ARGS = ["run", *SPLIT_SMOKE]


def launch(workdir, *extra):
  env = dict(os.environ, WANDB_MODE="disabled")
  return subprocess.Popen([sys.executable, "-m", "depthscale.cli", *ARGS, "--workdir",
                           str(workdir), *extra], cwd=ROOT, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def finish(procs):
  errs = []
  for p in procs:
    _, err = p.communicate(timeout=600)
    assert p.returncode == 0, err[-2000:]
    errs.append(err)
  return errs


def done(err):
  return [l.split()[2] for l in err.splitlines() if l.endswith(" done")]


@pytest.mark.slow
def test_concurrent_launches_match_one_process(tmp_path, reference_run):
  """Two independent workers on one workdir (no jax.distributed): each pulls groups, no
  group is trained twice, and the results equal one process."""
  ref, err = reference_run
  assert len(done(err)) == 2
  both = tmp_path / "both"
  errs = finish([launch(both), launch(both, "--exit-when-idle")])
  trained = done(errs[0]) + done(errs[1])
  assert sorted(trained) == sorted(set(trained)) and len(trained) == 2  # never twice
  finish([launch(both)])  # a rerun finds everything done
  assert rows(both) == rows(ref)


def test_corrupt_latest_checkpoint_falls_back_to_previous(tmp_path, capsys):
  tree = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "step": np.zeros((), np.int32)}
  ck = GroupCheckpoints(str(tmp_path / "ck"))
  ck.save(10, tree)
  ck.save(20, {"w": tree["w"] + 1, "step": np.full((), 20, np.int32)})
  for root, _, files in os.walk(tmp_path / "ck" / "20"):
    for f in files:  # a half-written save: every file truncated
      open(os.path.join(root, f), "w").close()
  step, got = GroupCheckpoints(str(tmp_path / "ck")).restore_latest(tree)
  assert step == 10 and np.array_equal(got["w"], tree["w"])
  assert "unreadable" in capsys.readouterr().err
