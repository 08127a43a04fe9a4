"""The probed plan against the measured run: for each study, `depthscale plan --json`
then `depthscale run` in a fresh workdir (sharing the probe cache), and per group the
estimate (step_s x steps) over the measured training time (train_s, compile excluded),
and the plan's memory over the run's compiled memory. Usage:
  python tools/bench/plan_accuracy.py OUT.json experiments/quickstart.py:smoke ...
"""
import csv
import json
import os
import subprocess
import sys
import tempfile


def main(out, *studies):
  root = tempfile.mkdtemp(prefix="plan-accuracy-")
  env = dict(os.environ, DEPTHSCALE_CACHE=os.path.join(root, "cache"), WANDB_MODE="disabled")
  report = []
  for study in studies:
    name = study.replace("/", "_").replace(":", "_")
    pj, wd = os.path.join(root, name + ".plan.json"), os.path.join(root, name)
    dep = [sys.executable, "-m", "depthscale.cli"]
    subprocess.run(dep + ["plan", "--config", study, "--json", pj, "--no-progress"],
                   env=env, check=True, stdout=subprocess.DEVNULL)
    subprocess.run(dep + ["run", "--config", study, "--workdir", wd, "--no-progress"],
                   env=env, check=True, stderr=subprocess.DEVNULL)
    est = {g["id"]: g for g in json.load(open(pj))["groups"]}
    with open(os.path.join(wd, "results.csv")) as f:
      rows = {r["group"]: r for r in csv.DictReader(f)}
    groups = [dict(id=gid, est_train_s=est[gid]["est_train_s"],
                   train_s=float(rows[gid]["train_s"]),
                   ratio=est[gid]["est_train_s"] / float(rows[gid]["train_s"]),
                   memory_ratio=est[gid]["memory_bytes"] / float(rows[gid]["memory_bytes"]))
              for gid in est]
    total_e = sum(g["est_train_s"] for g in groups)
    total_m = sum(g["train_s"] for g in groups)
    report.append(dict(study=study, groups=groups, est_train_s=total_e, train_s=total_m,
                       ratio=total_e / total_m))
    print(f"{study}: est {total_e:.1f} s / measured {total_m:.1f} s = {total_e / total_m:.2f}; "
          f"memory plan/run {[round(g['memory_ratio'], 3) for g in groups]}", flush=True)
  json.dump(report, open(out, "w"), indent=1)


if __name__ == "__main__":
  main(*sys.argv[1:])
