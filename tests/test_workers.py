"""Independent workers on one workdir, on CPU: work pulling with leases, takeover of a
frozen (SIGSTOP) and of a killed (-9) worker's group from its checkpoint, the frozen one
writing nothing after SIGCONT, live W&B curves, and a stop request served in seconds."""
import glob
import hashlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT, read_rows
from depthscale.io import leases

SMOKE = "experiments/quickstart.py:smoke"
# 3 groups of one model (depth 2, seeds 0-2: one program), float64 (results independent of
# rounding), checkpoints every 60 of 180 steps, leases lapsing after 4 s
ARGS = ["--config", SMOKE, "--no-progress", "--config.plan.max_models_per_group=1",
        "--config.grid.depth=[2]", "--config.grid.seed=[0, 1, 2]", "--config.train.steps=180",
        "--config.model.dtype=float64", "--config.lease_s=4.0"]


def launch(workdir, *extra, wandb="disabled"):
  env = dict(os.environ, WANDB_MODE=wandb)
  return subprocess.Popen([sys.executable, "-m", "depthscale.cli", "run", *ARGS,
                           "--workdir", str(workdir), *extra], cwd=ROOT, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def holders(workdir, at_least_step):
  """{group: pid} of live leases whose holder has saved a checkpoint >= at_least_step."""
  out = {}
  for path in glob.glob(os.path.join(workdir, "leases", "*.*")):
    gid = os.path.basename(path).rsplit(".", 1)[0]
    if ".tmp-" in path:
      continue
    rec = leases.latest(str(workdir), gid)[1]
    ck = os.path.join(workdir, "checkpoints", gid)
    steps = [int(d) for d in os.listdir(ck) if d.isdigit()] if os.path.isdir(ck) else []
    if rec and not rec.get("released") and rec.get("pid") and max(steps or [0]) >= at_least_step:
      out[gid] = rec["pid"]
  return out


def snapshot(workdir):
  """Hashes of every results and checkpoint file (what a worker could write)."""
  out = {}
  for sub in ("groups", "checkpoints"):
    for root, _, files in os.walk(os.path.join(workdir, sub)):
      for f in files:
        p = os.path.join(root, f)
        with open(p, "rb") as fh:
          out[p] = hashlib.sha1(fh.read()).hexdigest()
  return out


def wait_for(cond, timeout, procs):
  deadline = time.time() + timeout
  while not (got := cond()):
    assert time.time() < deadline, [p.poll() for p in procs]
    time.sleep(0.05)
  return got


@pytest.mark.slow
def test_workers_take_over_frozen_and_killed_workers_groups(tmp_path):
  work, ref = tmp_path / "w", tmp_path / "ref"
  workers = [launch(work, wandb="offline") for _ in range(3)]
  reference = launch(ref)
  pids = {p.pid: p for p in workers}
  held = wait_for(lambda: {g: pid for g, pid in holders(work, 60).items() if pid in pids},
                  300, workers)
  frozen_group, frozen_pid = next(iter(held.items()))
  os.kill(frozen_pid, signal.SIGSTOP)
  # live W&B: the frozen group's model has an offline run holding curves already
  assert not os.path.exists(work / "groups" / f"{frozen_group}.json")
  files = glob.glob(str(work / "wandb" / "offline-run-*" / "*.wandb"))
  assert any(b"loss" in open(f, "rb").read() for f in files), files
  killed = wait_for(lambda: {g: pid for g, pid in holders(work, 60).items()
                             if pid in pids and pid != frozen_pid}, 300, workers)
  killed_group, killed_pid = next(iter(killed.items()))
  os.kill(killed_pid, signal.SIGKILL)
  survivor = next(p for p in workers if p.pid not in (frozen_pid, killed_pid))
  _, err = survivor.communicate(timeout=600)
  assert survivor.returncode == 0, err[-3000:]
  assert err.count("lapsed") >= 2 and "resumes from its step-" in err, err[-3000:]
  for gid in (frozen_group, killed_group):
    assert os.path.exists(work / "groups" / f"{gid}.json"), gid
  before = snapshot(work)
  os.kill(frozen_pid, signal.SIGCONT)
  _, err = pids[frozen_pid].communicate(timeout=300)
  assert pids[frozen_pid].returncode == 0, err[-3000:]
  assert f"group {frozen_group} was taken over by another worker" in err, err[-3000:]
  assert snapshot(work) == before  # the frozen worker wrote nothing after SIGCONT
  pids[killed_pid].communicate()
  _, err = reference.communicate(timeout=600)
  assert reference.returncode == 0, err[-3000:]
  assert read_rows(work) == read_rows(ref)
  for gid in os.listdir(ref / "groups"):
    a = json.loads((ref / "groups" / gid).read_text())
    b = json.loads((work / "groups" / gid).read_text())
    assert a["curves"] == b["curves"], gid


@pytest.mark.slow
@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 0), (signal.SIGINT, 130)],
                         ids=["SIGTERM", "Ctrl-C"])
def test_a_stop_is_served_in_seconds_whatever_steps_per_call(sig, code, tmp_path):
  """One dispatch may hold all 3000 steps (steps_per_call = steps = checkpoint_every):
  SIGTERM, or Ctrl-C, still saves the current step within seconds (one line, no
  traceback), and a rerun resumes there."""
  work = tmp_path / "w"
  extra = ["--config.plan.max_models_per_group=2", "--config.grid.depth=[2]",
           "--config.train.steps=3000",
           "--config.train.steps_per_call=3000", "--config.checkpoint_every=3000",
           "--config.model.dtype=float32"]
  p = launch(work, *extra)
  def training():
    groups = [os.path.basename(x)[:-2] for x in glob.glob(str(work / "leases" / "*.1"))]
    return any(((leases.latest(str(work), g)[1] or {}).get("step") or 0) >= 20 for g in groups)
  wait_for(training, 300, [p])
  t0 = time.time()
  p.send_signal(sig)
  _, err = p.communicate(timeout=120)
  latency = time.time() - t0
  assert p.returncode == code, err[-2000:]
  assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-2000:]
  print(f"stop latency {latency:.1f} s")
  assert latency < 30, latency
  saved = [int(d) for d in os.listdir(glob.glob(str(work / "checkpoints" / "*"))[0])
           if d.isdigit()]
  assert saved and 0 < saved[0] < 3000, saved
  assert "Rerun the same command to resume" in err
  p = launch(work, *extra)  # the rerun resumes there (then is stopped again)
  lines = []
  for line in p.stderr:
    lines.append(line)
    if "resumes from" in line:
      break
  p.terminate()
  p.communicate(timeout=120)
  assert f"resumes from its step-{saved[0]} checkpoint" in "".join(lines), lines


def test_the_requeue_command_outlives_the_sigterm_its_requeue_sends():
  """Under SLURM the runner hands a USR2 on to submitit's handler, which runs `scontrol
  requeue`: that cancels the job step, and SLURM sends SIGTERM to every process of the
  step, the scontrol still exiting included. Killed so, it failed the task, and
  `launch/slurm.py --wait` read that error though the requeue went through. Here the
  handler's command sends itself that SIGTERM."""
  from depthscale.sweep.runner import StopFlag
  stop, got = StopFlag(), {}

  def submitits_handler(signum, frame):  # its subprocess.check_call of scontrol, in effect
    got["rc"] = subprocess.call(["sh", "-c", "kill -TERM $$; exit 0"])

  stop.previous, stop.signum = {signal.SIGUSR2: submitits_handler}, signal.SIGUSR2
  before = signal.getsignal(signal.SIGTERM)
  try:
    with pytest.raises(SystemExit) as out:
      stop.hand_over()
  finally:
    signal.signal(signal.SIGTERM, before)
  assert out.value.code == 0 and got["rc"] == 0, got
