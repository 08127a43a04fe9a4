"""kill -9 of `depthscale run` at the first checkpoint after growth changes a model's length
bucket (16 -> 32, while its group-mates are still at 16), and again at the first after
the group reached 64, then a rerun: its rows, curves and per-position accuracy must equal
an uninterrupted run's (issue 49 item 3). The Z60 control's smoke grown to 64: about 3
minutes on a 2-core CPU.

  python tools/growth_kill_check.py OUTDIR     (exit 0: equal; 1: not; OUTDIR/ref is reused)
"""
from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS, EVERY = 900, 60
ARGS = ["--config", "experiments/a5_depth.py:control,cpu,smoke", "--no-progress",
        "--config.train.length_max=64", f"--config.train.steps={STEPS}",
        f"--config.checkpoint_every={EVERY}"]


def cli(workdir: str) -> subprocess.Popen:
  env = dict(os.environ, WANDB_MODE="disabled", PYTHONPATH=ROOT)
  return subprocess.Popen([sys.executable, "-m", "depthscale.cli", "run", *ARGS, "--workdir",
                           workdir], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)


def run_to_end(workdir: str) -> str:
  p = cli(workdir)
  _, err = p.communicate()
  if p.returncode:
    sys.exit(f"depthscale run failed:\n{err[-3000:]}")
  return err


def checkpoint_steps(workdir: str) -> list[int]:
  found = []
  for _, dirs, _ in os.walk(os.path.join(workdir, "checkpoints")):
    found += [int(d) for d in dirs if d.isdigit()]
  return found


def rows(workdir: str) -> list[dict]:
  with open(os.path.join(workdir, "results.csv")) as f:
    return [{k: v for k, v in r.items() if not k.endswith("_s")} for r in csv.DictReader(f)]


def group(workdir: str) -> dict:
  (gid,) = os.listdir(os.path.join(workdir, "groups"))
  with open(os.path.join(workdir, "groups", gid)) as f:
    return json.load(f)


def kill_points(ref: dict) -> list[int]:
  """The first checkpoint after the group's longest bucket reaches 32, and 64."""
  paid = np.asarray(ref["curves"]["paid"], float)  # [models, recorded points]
  every = STEPS // paid.shape[1]
  print(f"paid length per model recorded every {every} steps; models' buckets differ at "
        f"steps {[j * every for j in range(paid.shape[1]) if len(set(paid[:, j])) > 1]}")
  points = []
  for bucket in (32, 64):
    first = next(j for j in range(paid.shape[1]) if paid[:, j].max() >= bucket) * every
    points.append((first // EVERY + 1) * EVERY)
    print(f"bucket {bucket} first at step {first}; kill after checkpoint {points[-1]}: "
          f"paid per model there {paid[:, points[-1] // every].tolist()}")
  return points


def main() -> int:
  out = sys.argv[1]
  ref, got = os.path.join(out, "ref"), os.path.join(out, "got")
  if not os.path.exists(os.path.join(ref, "results.csv")):
    run_to_end(ref)
  for step in kill_points(group(ref)):
    p = cli(got)
    while max(checkpoint_steps(got) or [0]) < step and p.poll() is None:
      time.sleep(0.1)
    p.send_signal(signal.SIGKILL)
    p.communicate()
    print(f"killed with checkpoints {sorted(checkpoint_steps(got))}")
  err = run_to_end(got)
  print("\n".join(line for line in err.splitlines() if "resumes" in line))
  a, b = group(ref), group(got)
  same = rows(ref) == rows(got) and a["curves"] == b["curves"] \
      and a["per_position_acc"] == b["per_position_acc"]
  print("EQUAL" if same else "DIFFERENT", "rows, curves and per-position accuracy")
  return 0 if same else 1


if __name__ == "__main__":
  sys.exit(main())
