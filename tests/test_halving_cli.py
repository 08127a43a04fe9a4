"""A halving study (train.stop=halving) through `depthscale run`: killed with SIGKILL after
its rung, or stopped with SIGTERM, then rerun, it ends with the rows and curves of an
uninterrupted run; `status` and `report` run while it writes, each in one line or a
clean report, and do not disturb it (issue 50's signals and concurrent readers)."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT, read_rows
from test_queue_cli import checkpoint_steps, cli, run_to_end

ARGS = ["--config", "experiments/quickstart.py:smoke", "--no-progress",
        "--config.grid.depth=[1]", "--config.grid.lr=[1e-3,3e-3,1e-2]",
        "--config.train.stop=halving", "--config.train.steps=60",
        "--config.checkpoint_every=20"]  # one rung, at step 20


def run_until(workdir, step):
  """A run started on `workdir`, once it has checkpointed `step` (or ended)."""
  p = cli("run", *ARGS, "--workdir", str(workdir))
  deadline = time.time() + 300
  while max(checkpoint_steps(workdir) or [0]) < step and p.poll() is None:
    assert time.time() < deadline
    time.sleep(0.1)
  return p


def group_file(workdir):
  (gid,) = os.listdir(workdir / "groups")
  return json.loads((workdir / "groups" / gid).read_text())


@pytest.mark.slow
def test_halving_study_killed_or_stopped_and_read_while_it_writes(tmp_path):
  ref = tmp_path / "ref"
  run_to_end(ref, ARGS)
  rows = read_rows(ref)
  assert sorted(r["stop"] for r in rows) == ["budget", "budget", "halved", "halved",
                                             "halved", "halved"], rows
  # kill -9 after the rung's checkpoint; before it, status and report read the workdir
  # while the run holds it in the middle of training (paused, so that it cannot finish
  # first on a fast machine)
  got = tmp_path / "got"
  p = run_until(got, 20)
  assert p.poll() is None, "the run ended before it could be read and killed"
  p.send_signal(signal.SIGSTOP)
  readers = [subprocess.run([sys.executable, "-m", "depthscale.cli", cmd, str(got)],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
             for cmd in ("status", "report")]
  p.send_signal(signal.SIGCONT)
  p.send_signal(signal.SIGKILL)
  p.communicate()
  for r in readers:
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) <= 1, r.stderr
  status = readers[0].stdout
  assert readers[0].returncode == 0 and "1 groups: 0 done, 1 running" in status, status
  assert f"pid {p.pid}" in status and "slots " in status, status
  assert readers[1].returncode != 0 and "run the sweep" in readers[1].stderr, readers[1].stderr
  assert not os.path.exists(got / "report.md") and not os.path.exists(got / "results.csv")
  assert "resumes from its step-" in run_to_end(got, ARGS)
  assert read_rows(got) == rows
  assert group_file(got)["curves"] == group_file(ref)["curves"]
  # SIGTERM once it has checkpointed: a clean exit, then the rerun ends as uninterrupted
  term = tmp_path / "term"
  p = run_until(term, 20)
  p.send_signal(signal.SIGTERM)
  _, err = p.communicate(timeout=300)
  assert p.returncode == 0 and "Traceback" not in err, err[-2000:]
  assert "resumes from its step-" in run_to_end(term, ARGS)
  assert read_rows(term) == rows
  assert group_file(term)["curves"] == group_file(ref)["curves"]
