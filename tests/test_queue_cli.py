"""A study with a stopping rule and a queue (train.stop, train.slots) through
`depthscale run` (4 models, 3 slots): killed with SIGKILL at three points (before any
stop, at the first refill, after the program was rebuilt smaller), or stopped with
SIGTERM and Ctrl-C, rerun, it ends with the rows and curves of an uninterrupted run;
status and the report show the model-steps saved. The processes that are signalled are
`depthscale` processes; the runs to the end are the same command in the test's process
(conftest.cli_here), which has its programs traced already."""
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT, cli_here, read_rows, xla_env

ARGS = ["--config", "experiments/quickstart.py:smoke", "--no-progress",
        "--config.grid.depth=[1, 2]", "--config.train.steps=120",
        "--config.checkpoint_every=20", "--config.train.slots=3",
        "--config.train.stop=plateau", "--config.train.patience=2",
        "--config.train.rebuild_steps=1"]  # rebuild as soon as a slot idles


def cli(*args, devices=None):
  env = dict(xla_env(devices) if devices else os.environ, WANDB_MODE="disabled")
  return subprocess.Popen([sys.executable, "-m", "depthscale.cli", *args], cwd=ROOT, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def checkpoint_steps(workdir):
  steps = []
  for _, dirs, _ in os.walk(os.path.join(workdir, "checkpoints")):
    steps += [int(d) for d in dirs if d.isdigit()]
  return steps


def run_to_end(workdir, args=ARGS):
  """`depthscale run ARGS --workdir WORKDIR` to its end in this process: its stderr."""
  code, _, err = cli_here("run", *args, "--workdir", str(workdir))
  assert code == 0, err[-2000:]
  return err


@pytest.mark.slow
def test_kill_9_then_rerun_gives_the_uninterrupted_results(tmp_path):
  ref = tmp_path / "ref"
  err = run_to_end(ref)
  rows = read_rows(ref)
  assert len(rows) == 4 and {r["stop"] for r in rows} <= {"plateau", "budget", "solved"}
  started = sorted(int(r["started_at"]) for r in rows)
  assert started[:3] == [0, 0, 0] and started[3] > 0  # a model entered a freed slot
  end = max(int(r["started_at"]) + int(r["trained_steps"]) for r in rows)
  rebuilt = [int(x) for x in re.findall(r"rebuilt at step (\d+): \d+ -> \d+ slots", err)]
  late = [r for r in rebuilt if r + 40 <= end]  # a checkpoint after it, well before the end
  assert late and "-> 1 slots" in err, err[-2000:]
  got = tmp_path / "got"
  for wait_for in (20, started[3], late[-1]):  # before any stop; at the first refill;
    # after the last rebuild that leaves time to kill (its checkpoint: the smaller program)
    p = cli("run", *ARGS, "--workdir", str(got))
    deadline = time.time() + 300
    while max(checkpoint_steps(got) or [0]) < wait_for and p.poll() is None:
      assert time.time() < deadline
      time.sleep(0.1)
    p.send_signal(signal.SIGKILL)
    p.communicate()
  assert not os.path.exists(got / "results.csv")
  err = run_to_end(got)
  assert "resumes from its step-" in err
  assert read_rows(got) == rows
  (gid,) = os.listdir(ref / "groups")
  a, b = (json.loads((w / "groups" / gid).read_text()) for w in (ref, got))
  assert a["curves"] == b["curves"] and a["per_position_acc"] == b["per_position_acc"]
  # SIGTERM (a scheduler's stop) and Ctrl-C (SIGINT), each once its run has checkpointed:
  # the run ends cleanly with its checkpoint, and the rerun ends as uninterrupted
  for signum, code in ((signal.SIGTERM, 0), (signal.SIGINT, 130)):
    sig = tmp_path / signum.name
    p = cli("run", *ARGS, "--workdir", str(sig))
    deadline = time.time() + 300
    while not checkpoint_steps(sig) and p.poll() is None:
      assert time.time() < deadline
      time.sleep(0.1)
    p.send_signal(signum)
    _, err = p.communicate(timeout=300)
    assert p.returncode == code and "Traceback" not in err, (signum, err[-2000:])
    assert "Rerun the same command to resume" in err, err[-2000:]
    assert not os.path.exists(sig / "results.csv")
    assert "resumes from its step-" in run_to_end(sig)
    assert read_rows(sig) == rows
    c = json.loads((sig / "groups" / gid).read_text())
    assert a["curves"] == c["curves"] and a["per_position_acc"] == c["per_position_acc"]
  trained = sum(int(r["trained_steps"]) for r in rows)
  code, status, _ = cli_here("status", str(got))
  assert code == 0
  assert f"{trained} model-steps trained of a 480 budget" in status, status
  assert f"- model-steps: {trained} trained of a 480 budget" in (got / "report.md").read_text()


@pytest.mark.slow
def test_a_queued_group_saved_on_two_devices_is_refused_on_one_in_one_line(tmp_path):
  """Its slot table is its program's, sized for the device count: on another count the
  rerun says on how many devices it was saved (instead of JAX's IndivisibleError)."""
  w = tmp_path / "w"
  p = cli("run", *ARGS, "--workdir", str(w), devices=2)  # 3 slots + 1 filler on 2 devices
  deadline = time.time() + 300
  while not checkpoint_steps(w) and p.poll() is None:
    assert time.time() < deadline
    time.sleep(0.1)
  p.send_signal(signal.SIGKILL)
  p.communicate()
  assert checkpoint_steps(w) and not os.path.exists(w / "results.csv")
  q = cli("run", *ARGS, "--workdir", str(w), devices=1)
  out, err = q.communicate(timeout=600)
  assert q.returncode == 2, err[-2000:]
  last = err.strip().splitlines()[-1]
  assert "Traceback" not in err and last.startswith("depthscale: error: "), err[-2000:]
  assert "checkpoint was saved on 2 device(s) (4 program slots)" in last, last
  assert "this worker has 1 (3 slots)" in last and "--devices" in last, last
