"""A study's sizes that its probed plan says fit the time left, run to the end (issue 60,
item 5: reachability_depth.py at its accelerator sizes; gpu_check.sh's `reach_run` step).

  python tools/gpu/science_run.py --plan PLAN.json --budget SECONDS --workdir DIR
      [--json OUT.json] -- RUN_ARGS...

PLAN.json is `depthscale plan RUN_ARGS --json` of the same study on this device. Its groups
are summed per grid length (training and compile seconds), the smallest lengths first; the
longest run of them whose estimate x SAFETY plus START_S fits in --budget is run with
`depthscale run RUN_ARGS --config.grid.length=[...] --workdir DIR` (the study at those
sizes: every depth and seed of each). When none fits, nothing runs and the JSON says why
(exit 0: a plan that says hours is an answer). A run past the budget gets SIGTERM (it saves
a checkpoint) and this exits with its status. The JSON: the lengths, the estimate, the run's
status and seconds, results.csv without timing columns, and claims.json if written.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import subprocess
import sys
import time

SAFETY = 1.3   # the probed plan within 25% (BUILD_NOTES); a little more for the report
START_S = 40.0  # the run's own start, plan and report, beside the groups' estimate


def per_length(plan: dict) -> list[tuple[int, float]]:
  """[(length, estimated training + compile seconds)], shortest first."""
  sums: dict[int, float] = {}
  for g in plan["groups"]:
    sums[g["length"]] = sums.get(g["length"], 0.0) + g["est_train_s"] + g["compile_s"]
  return sorted(sums.items())


def pick(plan: dict, budget_s: float) -> tuple[list[int], float]:
  """The shortest lengths whose estimate fits `budget_s`, and that estimate (seconds)."""
  lengths, total = [], 0.0
  for length, s in per_length(plan):
    if START_S + SAFETY * (total + s) > budget_s:
      break
    lengths.append(length)
    total += s
  return lengths, total


def run(cmd: list[str], limit_s: float) -> tuple[int, float, str]:
  t0 = time.perf_counter()
  p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
  try:
    _, err = p.communicate(timeout=max(limit_s, 1))
  except subprocess.TimeoutExpired:
    p.send_signal(signal.SIGTERM)  # run saves a checkpoint and exits
    try:
      _, err = p.communicate(timeout=20)
    except subprocess.TimeoutExpired:
      p.kill()
      _, err = p.communicate()
    err = f"stopped by SIGTERM after {limit_s:.0f} s (the budget)\n{err}"
  return p.returncode, time.perf_counter() - t0, err


def main(argv=None) -> int:
  argv = sys.argv[1:] if argv is None else argv
  if "--" not in argv:
    raise SystemExit("usage: science_run.py --plan PLAN.json --budget S --workdir DIR "
                     "[--json OUT] -- RUN_ARGS...")
  split = argv.index("--")
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--plan", required=True)
  ap.add_argument("--budget", type=float, required=True, help="seconds this may take")
  ap.add_argument("--workdir", required=True)
  ap.add_argument("--json")
  ap.add_argument("--python", default=sys.executable)
  args = ap.parse_args(argv[:split])
  run_args = argv[split + 1:]
  t0 = time.perf_counter()
  with open(args.plan) as f:
    plan = json.load(f)
  lengths, est = pick(plan, args.budget)
  out = {"run_args": run_args, "budget_s": args.budget, "device": plan.get("device"),
         "per_length_est_s": dict(per_length(plan)), "plan_total_s": plan["est_train_s"]
         + plan.get("compile_s", 0.0), "lengths": lengths, "est_s": est, "ran": False}
  rc = 0
  if not lengths:
    out["why"] = (f"the shortest length's estimate x {SAFETY} + {START_S:.0f} s does not fit "
                  f"{args.budget:.0f} s")
  else:
    cmd = [args.python, "-m", "depthscale.cli", "run", *run_args,
           f"--config.grid.length={json.dumps(lengths)}", "--workdir", args.workdir]
    out["cmd"] = "depthscale " + " ".join(cmd[3:])
    print(f"science_run: lengths {lengths} of {[n for n, _ in per_length(plan)]}, estimated "
          f"{est:.0f} s: {out['cmd']}", flush=True)
    rc, seconds, err = run(cmd, args.budget - (time.perf_counter() - t0) - 5)
    out.update(ran=True, rc=rc, s=round(seconds, 1), stderr_tail=err.strip()[-1500:])
    try:
      with open(os.path.join(args.workdir, "results.csv")) as f:
        out["rows"] = [{k: v for k, v in r.items() if not k.endswith("_s")}
                       for r in csv.DictReader(f)]
      with open(os.path.join(args.workdir, "claims.json")) as f:
        out["claims"] = json.load(f)
    except (OSError, ValueError) as e:
      out.setdefault("rows", None)
      out["missing"] = f"{type(e).__name__}: {e}"
  if args.json:
    with open(args.json, "w") as f:
      json.dump(out, f, indent=1)
  print(f"science_run: {'ran lengths ' + str(lengths) if out['ran'] else 'nothing run: ' + out['why']}"
        + (f", exit {rc} after {out['s']} s, {len(out.get('rows') or [])} models in results.csv"
           if out["ran"] else ""))
  return rc


if __name__ == "__main__":
  sys.exit(main())
