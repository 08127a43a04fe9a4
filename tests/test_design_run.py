"""An adaptive study (design.kind=adaptive, with a stopping rule and a queue of 2 slots)
through `depthscale run`: its rounds appended at barriers, never rewritten. Killed with
SIGKILL in the first round, at a barrier and while a decision is being written, then
rerun, it makes the same decisions and ends with the same rows, bit for bit; two workers
started together make each decision once; status and the report say what the design did.
The runs that are killed or raced are `depthscale` processes; the uninterrupted reference
and the last rerun are the same command in the test's process (conftest.cli_here)."""
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT, cli_here, read_rows

ARGS = ["--config", "experiments/quickstart.py:smoke", "--no-progress",
        "--config.grid.seed=[0, 1, 2, 3]", "--config.train.steps=60",
        "--config.checkpoint_every=20", "--config.design.kind=adaptive",
        "--config.design.budget=0.8", "--config.design.max_seeds=6",
        "--config.design.round_size=3",
        # a stopping rule and a queue, as any schedule works under the design
        "--config.train.stop=plateau", "--config.train.patience=1", "--config.train.slots=2"]
FAULT = "DEPTHSCALE_DESIGN_FAULT"


def cli(*args, fault=None):
  env = dict(os.environ, WANDB_MODE="disabled")
  env.pop(FAULT, None)
  if fault:
    env[FAULT] = fault
  return subprocess.Popen([sys.executable, "-m", "depthscale.cli", *args], cwd=ROOT, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def run_to_end(workdir, fault=None):
  p = cli("run", *ARGS, "--workdir", str(workdir), fault=fault)
  _, err = p.communicate(timeout=600)
  return p.returncode, err


def rounds(workdir):
  d = workdir / "design"
  return {n: (d / n).read_bytes() for n in sorted(os.listdir(d)) if n.startswith("round-")}


def checkpointed(workdir):
  return any(d.isdigit() for _, ds, _ in os.walk(workdir / "checkpoints") for d in ds)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
  """The study run once, uninterrupted: its workdir, round files and rows (both tests
  compare with it; one xdist group, so it trains once)."""
  ref = tmp_path_factory.mktemp("design") / "ref"
  code, _, err = cli_here("run", *ARGS, "--workdir", str(ref))
  assert code == 0, err[-2000:]
  want = rounds(ref)
  assert len(want) >= 2 and "design decision 1:" in err, err[-2000:]
  rows = read_rows(ref)
  assert len(rows) > 6  # the first round's and at least one decision's
  return ref, want, rows


@pytest.mark.slow
@pytest.mark.xdist_group("design_run")
def test_killed_anywhere_the_design_decides_the_same(tmp_path, reference):
  ref, want, rows = reference
  got = tmp_path / "got"
  p = cli("run", *ARGS, "--workdir", str(got))  # 1: in the first round, once checkpointed
  deadline = time.time() + 300
  while not checkpointed(got) and p.poll() is None:
    assert time.time() < deadline
    time.sleep(0.1)
  p.send_signal(signal.SIGKILL)
  p.communicate()
  assert not (got / "design").exists()
  code, _ = run_to_end(got, fault="decide:1")  # 2: at the first barrier, before deciding
  assert code == -signal.SIGKILL and not rounds_or_none(got)
  code, _ = run_to_end(got, fault="write:2")  # 3: while decision 2 is being written
  assert code == -signal.SIGKILL and list(rounds(got)) == ["round-001.json"]
  assert any(n.startswith(".tmp-") for n in os.listdir(got / "design"))  # the half write
  code, _, err = cli_here("run", *ARGS, "--workdir", str(got))
  assert code == 0, err[-2000:]
  assert rounds(got) == want
  assert read_rows(got) == rows
  code, status, _ = cli_here("status", str(got))
  assert code == 0
  assert "design: adaptive, stopped (budget)" in status, status
  assert "budget 80%" in status and f"{len(rows)} models chosen" in status
  report = (got / "report.md").read_text()
  assert "## Adaptive design" in report and "stop (budget)" in report


def rounds_or_none(workdir):
  return rounds(workdir) if (workdir / "design").exists() else {}


@pytest.mark.slow
@pytest.mark.xdist_group("design_run")
def test_two_workers_make_each_decision_once(tmp_path, reference):
  ref = reference[0]
  w = tmp_path / "w"
  ps = [cli("run", *ARGS, "--workdir", str(w)) for _ in range(2)]
  errs = [p.communicate(timeout=600)[1] for p in ps]
  assert all(p.returncode == 0 for p in ps), [e[-1500:] for e in errs]
  said = "".join(errs)
  for k in range(1, len(rounds(ref)) + 1):
    assert said.count(f"design decision {k}:") == 1, said[-3000:]
  assert rounds(w) == rounds(ref)
  assert read_rows(w) == read_rows(ref)
