"""Merge the steps of tools/gpu_check.sh into one JSON: each step's status (and its error
text when it failed), what JAX sees, the bench targets, and the plan's estimate against
the measured training time of the smoke study.

  python tools/gpu_check.py WORK OUT.json [--quick 0|1]    (gpu_check.sh calls it)

Reads only WORK (the script's logs and outputs); imports nothing from depthscale, so it
still reports what a broken install left. Exit status 1 when a step failed.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time

STEPS = ("devices_float32", "devices_bfloat16", "bench_tiny", "bench_medium", "bench_mixed",
         "plan", "run")
TINY_TARGET = 50.0     # engine over one model at a time, tiny preset, 256 models, on a GPU
MEDIUM_TARGET = 0.30   # engine fraction of the bf16 matmul peak, medium preset, on a GPU
ERROR_CHARS = 2000     # the tail of a failed step's stderr kept in the JSON


def read(work: str, name: str) -> str | None:
  try:
    with open(os.path.join(work, name)) as f:
      return f.read()
  except OSError:
    return None


def read_step(work: str, name: str) -> dict:
  """{status: ok | failed | skipped | absent, cmd, rc, seconds, error} of one step."""
  skipped = read(work, f"{name}.skipped")
  if skipped is not None:
    why = skipped.strip()
    return {"status": "absent" if why == "absent" else "skipped", "why": why}
  rc_text = read(work, f"{name}.rc")
  if rc_text is None:
    return {"status": "failed", "error": "not run (the script stopped before this step)"}
  rc = int(rc_text)
  start, end = (float(t.replace(",", ".")) for t in read(work, f"{name}.s").split())  # locale
  out = {"status": "ok" if rc == 0 else "failed", "rc": rc, "seconds": round(end - start, 2),
         "cmd": "depthscale " + " ".join(read(work, f"{name}.cmd").splitlines())}
  if rc != 0:
    err = (read(work, f"{name}.err") or "").strip()
    out["error"] = ("timed out; " if rc == 124 else "") + (err[-ERROR_CHARS:] or "no output")
  return out


def load_json(step: dict, text: str | None, what: str):
  """The JSON a successful step wrote, or None (and the step marked failed)."""
  if step["status"] != "ok":
    return None
  try:
    return json.loads(text)
  except (TypeError, ValueError) as e:
    step.update(status="failed", error=f"{what}: no JSON ({e})")
    return None


def on_gpu(bench: dict) -> bool:
  return bench["device"]["platform"] == "gpu"


def tiny_summary(bench: dict) -> dict:
  ratio = bench["engine_over_sequential"]
  return {"models": bench["preset"]["models"],
          "engine_model_steps_per_s": bench["engine"]["model_steps_per_s"],
          "sequential_model_steps_per_s": bench["sequential"]["model_steps_per_s"],
          "engine_over_sequential": ratio, "target": f">= {TINY_TARGET:g} on a GPU",
          "meets_target": ratio >= TINY_TARGET if on_gpu(bench) else None, "bench": bench}


def medium_summary(bench: dict) -> dict:
  fraction = bench["engine_fraction_of_peak"]
  return {"dtype": bench["dtype"]["compute"], "engine_gflops": bench["engine"]["gflops"],
          "matmul_peak_gflops": bench["matmul_peak_gflops"],
          "engine_fraction_of_peak": fraction, "target": f">= {MEDIUM_TARGET:g} on a GPU",
          "meets_target": fraction >= MEDIUM_TARGET if on_gpu(bench) else None,
          "bench": bench}


def mixed_summary(bench: dict) -> dict:
  return {"engine_over_sequential": bench["engine_over_sequential"],
          "engine_fraction_of_peak": bench["engine_fraction_of_peak"], "bench": bench}


def measured_groups(workdir: str) -> dict:
  """{group id: {models, train_s, compile_s}} from the study's results.csv (one train_s
  per group, repeated on each of its model rows)."""
  with open(os.path.join(workdir, "results.csv")) as f:
    rows = list(csv.DictReader(f))
  groups = {}
  for row in rows:
    g = groups.setdefault(row["group"], {"models": 0, "train_s": float(row["train_s"]),
                                         "compile_s": float(row["compile_s"])})
    g["models"] += 1
  return groups


def estimate(plan: dict, measured: dict) -> dict:
  """The plan's training seconds over the run's, in total and per group."""
  total = sum(g["train_s"] for g in measured.values())
  groups = []
  for g in plan["groups"]:
    m = measured.get(g["id"])
    groups.append({"id": g["id"], "models": g["models"], "est_train_s": g["est_train_s"],
                   "train_s": m["train_s"] if m else None,
                   "est_over_measured": g["est_train_s"] / m["train_s"] if m else None,
                   "est_compile_s": g["compile_s"],
                   "compile_s": m["compile_s"] if m else None})
  return {"device": plan["device"], "est_train_s": plan["est_train_s"],
          "measured_train_s": total, "est_over_measured": plan["est_train_s"] / total,
          "same_groups": sorted(g["id"] for g in plan["groups"]) == sorted(measured),
          "groups": groups}


def merge(work: str, quick: bool) -> dict:
  steps = {name: read_step(work, name) for name in STEPS}
  result = {"ok": None, "failed": [], "quick": quick, "work": work,
            "written": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "steps": steps, "devices": {}}
  for dtype in ("float32", "bfloat16"):
    name = f"devices_{dtype}"
    result["devices"][dtype] = load_json(steps[name], read(work, f"{name}.out"), name)
  for name, summary in (("tiny", tiny_summary), ("medium", medium_summary),
                        ("mixed", mixed_summary)):
    step = steps[f"bench_{name}"]
    bench = load_json(step, read(work, f"bench_{name}.json"), f"bench_{name}")
    result[name] = summary(bench) if bench else step.get("why") or None
  result["plan"] = load_json(steps["plan"], read(work, "plan.json"), "plan --json")
  smoke = None
  if steps["run"]["status"] == "ok":
    workdir = os.path.join(work, "smoke")
    try:
      groups = measured_groups(workdir)
      smoke = {"workdir": workdir, "groups": groups,
               "measured_train_s": sum(g["train_s"] for g in groups.values())}
    except (OSError, KeyError, ValueError) as e:
      steps["run"].update(status="failed", error=f"results.csv: {type(e).__name__}: {e}")
  result["smoke"] = smoke
  result["estimate"] = None
  if result["plan"] and smoke:
    try:
      result["estimate"] = estimate(result["plan"], smoke["groups"])
    except (KeyError, TypeError, ZeroDivisionError) as e:
      steps["plan"].update(status="failed",
                           error=f"plan JSON lacks what the estimate needs: {type(e).__name__}: {e}")
  result["failed"] = [name for name, step in steps.items() if step["status"] == "failed"]
  result["ok"] = not result["failed"]
  return result


def summary_lines(result: dict) -> list[str]:
  lines = [f"gpu_check: {'ok' if result['ok'] else 'FAILED: ' + ', '.join(result['failed'])}"]
  dev = result["devices"].get("float32")
  if dev:
    lines.append(f"  devices: {dev['count']} x {dev['kind']} ({dev['platform']})")
  for dtype, dev in result["devices"].items():
    if dev and "matmul_peak_gflops" in dev:
      frac = dev.get("fraction_of_table_peak")
      lines.append(f"  matmul peak {dtype}: {dev['matmul_peak_gflops']:.0f} GFLOP/s"
                   + (f" ({100 * frac:.0f}% of the table's)" if frac else ""))
  if isinstance(result["tiny"], dict):
    t = result["tiny"]
    lines.append(f"  tiny x{t['models']}: engine/sequential {t['engine_over_sequential']:.2f} "
                 f"(target {t['target']}: {t['meets_target']})")
  if isinstance(result["medium"], dict):
    m = result["medium"]
    lines.append(f"  medium {m['dtype']}: engine at {100 * m['engine_fraction_of_peak']:.1f}% "
                 f"of peak (target {m['target']}: {m['meets_target']})")
  for name in ("medium", "mixed"):
    if isinstance(result[name], str):
      lines.append(f"  {name}: {result[name]}")
  if result["estimate"]:
    e = result["estimate"]
    lines.append(f"  plan: est {e['est_train_s']:.2f} s training, measured "
                 f"{e['measured_train_s']:.2f} s, est/measured {e['est_over_measured']:.2f}")
  for name in result["failed"]:
    error = result["steps"][name].get("error", "")
    lines.append(f"  {name} failed: {error.strip().splitlines()[-1] if error.strip() else ''}")
  return lines


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("work")
  ap.add_argument("out")
  ap.add_argument("--quick", default="0", choices=("0", "1"))
  args = ap.parse_args(argv)
  result = merge(args.work, args.quick == "1")
  tmp = args.out + ".tmp"
  with open(tmp, "w") as f:
    json.dump(result, f, indent=2)
    f.write("\n")
  os.replace(tmp, args.out)
  print("\n".join(summary_lines(result) + [f"  wrote {args.out} (logs: {args.work})"]))
  return 0 if result["ok"] else 1


if __name__ == "__main__":
  sys.exit(main())
