"""A real single-node SLURM cluster runs a smoke sweep as a job array to completion; a task
sent USR2 mid-training checkpoints at that step within seconds, is requeued by submitit,
resumes from that step, and the merged results equal an uninterrupted run."""
import contextlib
import glob
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

import slurm_cluster
from conftest import OPTIMIZED_ENV, ROOT, SPLIT_SMOKE, read_rows

WHY = slurm_cluster.available()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(WHY is not None, reason=f"SLURM: {WHY}")]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
  c = slurm_cluster.Cluster(str(tmp_path_factory.mktemp("slurm"))).start()
  yield c
  c.stop()


def checkpoint_steps(workdir):
  steps = []
  for _, dirs, _ in os.walk(os.path.join(workdir, "checkpoints")):
    steps += [int(d) for d in dirs if d.isdigit()]
  return steps


def release_held_jobs(env):
  """SLURM holds a requeued job back for a while (BeginTime); let it start again now."""
  pending = subprocess.run(["squeue", "-h", "-t", "PD", "-o", "%i"], env=env,
                           capture_output=True, text=True).stdout.split()
  for job in pending:
    subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], env=env,
                   capture_output=True)


def lease_steps(workdir):
  out = []
  for path in glob.glob(os.path.join(workdir, "leases", "*.*")):
    if ".tmp-" not in path:
      with contextlib.suppress(OSError, ValueError):
        rec = json.load(open(path))
        if not rec.get("released") and rec.get("step"):
          out.append(rec["step"])
  return out


def test_usr2_mid_group_saves_that_step_and_the_requeued_task_resumes_it(
    cluster, reference_run, tmp_path):
  """No periodic checkpoint (checkpoint_every = steps): every checkpoint on disk comes
  from the USR2 (submitit's timeout/preemption warning) sent mid-training. The tasks'
  `scontrol` lingers a second after a requeue, as on a loaded host: the SIGTERM that the
  requeue sends to the job step reaches it before it exits."""
  ref, _ = reference_run
  work = tmp_path / "w"
  slow = tmp_path / "bin"
  slow.mkdir()
  (slow / "scontrol").write_text(f'#!/bin/sh\n{shutil.which("scontrol")} "$@"; rc=$?\n'
                                 '[ "$1" = requeue ] && sleep 1\nexit $rc\n')
  (slow / "scontrol").chmod(0o755)
  env = dict(cluster.env, WANDB_MODE="disabled", PYTHONPATH=ROOT,
             PATH=f"{slow}{os.pathsep}{cluster.env['PATH']}",
             **OPTIMIZED_ENV)  # SPLIT_SMOKE at the reference run's level
  args = [a for a in SPLIT_SMOKE if a != "--no-progress"] + ["--config.checkpoint_every=180"]
  p = subprocess.Popen([sys.executable, "launch/slurm.py", *args, "--workdir", str(work),
                        "--wait", "--timeout-min", "30"], cwd=ROOT, env=env, text=True,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
  deadline = time.time() + 600
  while not lease_steps(work):  # a task has started training (its first dispatch drained)
    assert p.poll() is None and time.time() < deadline, p.communicate()
    time.sleep(0.05)
  running = subprocess.run(["squeue", "-h", "-t", "R", "-o", "%i"], env=cluster.env,
                           capture_output=True, text=True).stdout.split()
  assert running
  t0 = time.time()
  for job in running:
    subprocess.run(["scancel", "--signal=USR2", job], env=cluster.env, check=True)
  while not checkpoint_steps(work):
    assert time.time() - t0 < 30, "no checkpoint within 30 s of USR2"
    time.sleep(0.05)
  latency = time.time() - t0
  saved = set(checkpoint_steps(work))
  assert saved and all(0 < s < 180 for s in saved), saved
  while p.poll() is None:
    release_held_jobs(cluster.env)
    assert time.time() < deadline + 600
    time.sleep(1)
  out, err = p.communicate()
  assert p.returncode == 0, (out, err[-3000:])
  assert "array of 2 tasks" in out and "report:" in out
  logs = "".join(open(f).read() for f in glob.glob(str(work / "slurm" / "*" / "*.err")))
  for s in saved:
    assert f"resumes from its step-{s} checkpoint" in logs, (s, logs[-3000:])
  print(f"USR2 -> checkpoint at steps {sorted(saved)} in {latency:.1f} s")
  assert read_rows(work) == read_rows(ref)
  assert (work / "report.md").exists()
