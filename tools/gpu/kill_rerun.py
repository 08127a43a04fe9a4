"""`depthscale run` of one study to the end, and again killed once (SIGKILL, after its first
checkpoint) and rerun: the same results bit for bit (issue 60, item 1, on the A5 smoke
study; gpu_check.sh's `a5_kill_rerun` step).

  python tools/gpu/kill_rerun.py --workdir DIR [--json OUT.json] -- RUN_ARGS...

RUN_ARGS follow `depthscale run` (--config ..., overrides; not --workdir). DIR/ref is
trained to the end; DIR/killed is started, killed with SIGKILL as soon as a checkpoint
step directory appears under it (once more from scratch if the run ended before the kill
landed), then rerun with the same command to the end (the JSON keeps the lines where it says
which checkpoint it resumed from). Each process compiles its own
programs unless JAX_COMPILATION_CACHE_DIR is set (gpu_check.sh sets it in quick mode only).
Compared: results.csv without its timing columns (names ending in _s, started_at) and
every groups/*.json (the rows the same way, the loss curves, per-position accuracy).
Exit status 0 only if all three runs exited 0, the kill landed before the end and
everything compared is equal.
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

VOLATILE = ("started_at",)  # besides the columns ending in _s


def steady(row: dict) -> dict:
  return {k: v for k, v in row.items() if not k.endswith("_s") and k not in VOLATILE}


def results(workdir: str) -> dict:
  """{what: data} of a finished workdir, timing left out."""
  out = {}
  with open(os.path.join(workdir, "results.csv")) as f:
    out["results.csv"] = sorted((steady(r) for r in csv.DictReader(f)),
                                key=lambda r: (r.get("group", ""), r.get("model", "")))
  groups = os.path.join(workdir, "groups")
  for name in sorted(os.listdir(groups)) if os.path.isdir(groups) else ():
    if name.endswith(".json"):
      with open(os.path.join(groups, name)) as f:
        g = json.load(f)
      g["rows"] = [steady(r) for r in g.get("rows", [])]
      out[f"groups/{name}"] = g
  return out


def differences(a: dict, b: dict, limit: int = 10) -> list[str]:
  """Where two results() differ, as lines (at most `limit`)."""
  diffs = []

  def walk(x, y, path):
    if len(diffs) >= limit:
      return
    if isinstance(x, dict) and isinstance(y, dict):
      for k in sorted(set(x) | set(y), key=str):
        if k not in x or k not in y:
          diffs.append(f"{path}/{k}: only in {'ref' if k in x else 'rerun'}")
        else:
          walk(x[k], y[k], f"{path}/{k}")
    elif isinstance(x, list) and isinstance(y, list):
      if len(x) != len(y):
        diffs.append(f"{path}: {len(x)} items in ref, {len(y)} in the rerun")
      for i, (u, v) in enumerate(zip(x, y)):
        walk(u, v, f"{path}[{i}]")
    elif x != y or type(x) is not type(y):
      diffs.append(f"{path}: ref {x!r}, rerun {y!r}")
  walk(a, b, "")
  return diffs


def checkpoint_steps(workdir: str) -> list[int]:
  root = os.path.join(workdir, "checkpoints")
  return sorted(int(d) for _, ds, _ in os.walk(root) for d in ds if d.isdigit())


def command(python: str, run_args: list[str], workdir: str) -> list[str]:
  return [python, "-m", "depthscale.cli", "run", *run_args, "--workdir", workdir]


def run_to_end(cmd: list[str], log) -> dict:
  t0 = time.perf_counter()
  p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
  row = {"rc": p.returncode, "s": round(time.perf_counter() - t0, 2),
         "resumed": [s.split("depthscale: ", 1)[-1] for s in p.stderr.splitlines()
                     if "resumes from" in s]}
  if p.returncode:
    row["error"] = p.stderr.strip()[-1500:]
  log(f"kill_rerun: {' '.join(cmd[3:])}: exit {p.returncode} after {row['s']} s")
  return row


def run_and_kill(cmd: list[str], workdir: str, log, poll_s: float = 0.005) -> dict:
  """Start the run, SIGKILL it when its first checkpoint step appears."""
  t0 = time.perf_counter()
  p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
  while p.poll() is None and not checkpoint_steps(workdir):
    time.sleep(poll_s)
  steps = checkpoint_steps(workdir)
  landed = p.poll() is None
  if landed:
    p.send_signal(signal.SIGKILL)
  _, err = p.communicate()
  done = os.path.exists(os.path.join(workdir, "results.csv"))
  row = {"rc": p.returncode, "s": round(time.perf_counter() - t0, 2), "killed": landed,
         "checkpoint_steps_at_kill": steps, "results_csv_at_kill": done}
  if not landed:
    row["error"] = "the run ended before the kill: " + (err.strip()[-500:] or "no output")
  log(f"kill_rerun: killed {'after checkpoint steps ' + str(steps) if landed else 'too late'}"
      f" at {row['s']} s")
  return row


def check(python: str, run_args: list[str], workdir: str, log=print) -> dict:
  ref, killed = os.path.join(workdir, "ref"), os.path.join(workdir, "killed")
  out = {"run_args": run_args, "workdir": workdir, "runs": {}}
  out["runs"]["ref"] = run_to_end(command(python, run_args, ref), log)
  for attempt in (1, 2):  # a run that ends before the kill lands: once more, from scratch
    subprocess.run(["rm", "-rf", killed], check=True)
    out["runs"]["killed"] = dict(run_and_kill(command(python, run_args, killed), killed, log),
                                 attempt=attempt)
    if out["runs"]["killed"]["killed"] and not out["runs"]["killed"]["results_csv_at_kill"]:
      break
  out["runs"]["rerun"] = run_to_end(command(python, run_args, killed), log)
  out["killed_mid_run"] = bool(out["runs"]["killed"]["killed"]
                               and not out["runs"]["killed"]["results_csv_at_kill"])
  ran = out["runs"]["ref"]["rc"] == 0 and out["runs"]["rerun"]["rc"] == 0
  out["differences"] = differences(results(ref), results(killed)) if ran else None
  out["compared"] = sorted(results(ref)) if ran else None
  out["same"] = ran and not out["differences"]
  out["ok"] = bool(out["same"] and out["killed_mid_run"])
  return out


def main(argv=None) -> int:
  argv = sys.argv[1:] if argv is None else argv
  if "--" not in argv:
    raise SystemExit("usage: kill_rerun.py --workdir DIR [--json OUT] -- RUN_ARGS...")
  split = argv.index("--")
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--workdir", required=True)
  ap.add_argument("--json")
  ap.add_argument("--python", default=sys.executable)
  args = ap.parse_args(argv[:split])
  run_args = argv[split + 1:]
  if any(a == "--workdir" or a.startswith("--workdir=") for a in run_args):
    raise SystemExit("kill_rerun.py: RUN_ARGS must not name --workdir (it picks DIR/ref and "
                     "DIR/killed)")
  out = check(args.python, run_args, os.path.abspath(args.workdir),
              log=lambda s: print(s, flush=True))
  if args.json:
    with open(args.json, "w") as f:
      json.dump(out, f, indent=1)
  verdict = ("same results bit for bit" if out["same"] else
             "DIFFERENT: " + "; ".join(out["differences"] or ["a run failed"]))
  resumed = out["runs"]["rerun"].get("resumed")
  print(f"kill_rerun: killed mid-run {out['killed_mid_run']}; rerun: "
        f"{'; '.join(resumed) if resumed else 'no checkpoint resumed'}; {verdict}")
  return 0 if out["ok"] else 1


if __name__ == "__main__":
  sys.exit(main())
