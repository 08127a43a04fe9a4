"""A real single-node SLURM cluster runs a smoke sweep as a job array to completion, and a
task requeued mid-training resumes and finishes with the results of an uninterrupted run."""
import os
import subprocess
import sys
import time

import pytest

import slurm_cluster
from conftest import ROOT, SPLIT_SMOKE, read_rows

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


def test_job_array_with_a_requeue_matches_one_process(cluster, reference_run, tmp_path):
  ref, _ = reference_run
  work = tmp_path / "w"
  env = dict(cluster.env, WANDB_MODE="disabled", PYTHONPATH=ROOT)
  args = [a for a in SPLIT_SMOKE if a != "--no-progress"]
  p = subprocess.Popen([sys.executable, "launch/slurm.py", *args, "--workdir", str(work),
                        "--wait", "--timeout-min", "30"], cwd=ROOT, env=env, text=True,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
  deadline = time.time() + 600
  while max(checkpoint_steps(work) or [0]) < 60:  # a task is mid-training: requeue it
    assert p.poll() is None and time.time() < deadline, p.communicate()
    time.sleep(0.3)
  jobs = subprocess.run(["squeue", "-h", "-t", "R", "-o", "%i"], env=cluster.env,
                        capture_output=True, text=True).stdout.split()
  assert jobs
  subprocess.run(["scontrol", "requeue", jobs[0]], env=cluster.env, check=True)
  # SLURM holds a requeued job back for a while (BeginTime); let it start again now.
  subprocess.run(["scontrol", "update", f"JobId={jobs[0]}", "StartTime=now"],
                 env=cluster.env, capture_output=True)
  out, err = p.communicate(timeout=900)
  assert p.returncode == 0, (out, err[-3000:])
  assert "array of 2 tasks" in out and "report:" in out
  assert read_rows(work) == read_rows(ref)
  assert (work / "report.md").exists()
