"""Merge the steps of tools/gpu/gpu_check.sh into one JSON: each step's status (and its error
text when it failed), what JAX sees, the bench targets, and the plan's estimate against
the measured training time of the smoke study.

  python tools/gpu/gpu_check.py WORK OUT.json [--quick 0|1]    (gpu_check.sh calls it)

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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # versus_torch, beside it

STEPS = ("settings", "bench_paper", "torch_paper", "a5_kill_rerun", "determinism", "gelu_paper",
         "bench_medium", "torch_medium", "bench_tiny", "torch_tiny", "plan_a5", "plan_a5_flops",
         "devices_float32", "devices_bfloat16", "reach_plan", "reach_run", "ablation_paper",
         "bench_mixed", "plan", "plan_smoke_flops", "run")
TINY_TARGET = 50.0     # engine over one model at a time, tiny preset, 256 models, on a GPU
MEDIUM_TARGET = 0.30   # engine fraction of the bf16 matmul peak, medium preset, on a GPU
# engine / best torch on a GPU (issue 48): the paper's shape, medium x64 bf16, tiny x256
TORCH_TARGETS = {"paper": 1.5, "medium": 1.5, "tiny": 4.0}
A5_HOURS_TARGET = 80.0  # a5_depth's probed plan, H100-hours
FLOPS_PLAN_TOLERANCE = 0.25  # `plan --device h100` within 25% of the probed plan
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
         "cmd": command(read(work, f"{name}.cmd").splitlines())}
  if rc != 0:
    err = (read(work, f"{name}.err") or "").strip()
    out["error"] = ("timed out; " if rc == 124 else "") + (err[-ERROR_CHARS:] or "no output")
  return out


def command(argv: list[str]) -> str:
  """A step's command as a user would type it: `depthscale ...` for the CLI's steps."""
  if argv[1:3] == ["-m", "depthscale.cli"]:
    return "depthscale " + " ".join(argv[3:])
  return " ".join(argv)


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


def paper_summary(bench: dict) -> dict:
  return {"models": bench["preset"]["models"], "as_defined": bench["preset"]["as_defined"],
          "engine_model_steps_per_s": bench["engine"]["model_steps_per_s"],
          "engine_tflops": bench["engine"]["gflops"] / 1e3,
          "engine_fraction_of_peak": bench["engine_fraction_of_peak"],
          "engine_over_sequential": bench["engine_over_sequential"], "bench": bench}


def versus(name: str, result: dict, torch_json: dict | None) -> None:
  """result[name]["versus_torch"]: tools/gpu/versus_torch.py's ratios and the target."""
  if not isinstance(result.get(name), dict) or not torch_json:
    return
  import versus_torch  # tools/gpu/, beside this file
  r = versus_torch.ratios(result[name]["bench"], torch_json)
  target = TORCH_TARGETS[name]
  r.update(target=f">= {target:g} on a GPU", meets_target=(
      r["engine_over_best_torch"] >= target if on_gpu(result[name]["bench"]) else None))
  result[name]["versus_torch"] = r


def a5_hours(probed: dict, flops: dict) -> dict:
  """a5_depth's probed s/step at a few depths, fitted linear in depth (a layer costs the
  same at every depth of one width) and summed over the sweep's groups as the FLOPs plan
  lists them; beside the FLOPs plan's own hours."""
  points = [(g["shape"][0], g["step_s"]) for g in probed["groups"]]
  n = len(points)
  mean_d, mean_s = sum(d for d, _ in points) / n, sum(t for _, t in points) / n
  var = sum((d - mean_d) ** 2 for d, _ in points)
  slope = sum((d - mean_d) * (t - mean_s) for d, t in points) / var if var else 0.0
  steps = {g["id"]: g["est_train_s"] / g["step_s"] for g in flops["groups"]}
  hours = sum((mean_s + slope * (g["shape"][0] - mean_d)) * steps[g["id"]]
              for g in flops["groups"]) / 3600
  est = flops["est_train_s"] / 3600
  gpu = probed["device"]["platform"] == "gpu"
  return {"probed_depths": [d for d, _ in points], "probed_step_s": [t for _, t in points],
          "s_per_step_per_layer": slope, "probed_h100_hours": hours,
          "target": f"<= {A5_HOURS_TARGET:g} H100-hours",
          "meets_target": hours <= A5_HOURS_TARGET if gpu else None,
          "flops_plan_hours": est, "flops_over_probed": est / hours,
          "flops_within_tolerance": abs(est / hours - 1) <= FLOPS_PLAN_TOLERANCE if gpu else None,
          "device": probed["device"]}


def flops_vs_probed(probed: dict, flops: dict) -> dict:
  """The quickstart smoke study: `plan --device h100` against the probed plan."""
  ratio = flops["est_train_s"] / probed["est_train_s"]
  gpu = probed["device"]["platform"] == "gpu"
  return {"probed_train_s": probed["est_train_s"], "flops_train_s": flops["est_train_s"],
          "flops_over_probed": ratio,
          "within_tolerance": abs(ratio - 1) <= FLOPS_PLAN_TOLERANCE if gpu else None}


def mixed_summary(bench: dict) -> dict:
  return {"engine_over_sequential": bench["engine_over_sequential"],
          "engine_fraction_of_peak": bench["engine_fraction_of_peak"], "bench": bench}


def determinism_summary(probe: dict | None) -> dict | None:
  """tools/gpu/determinism_probe.py's JSON with a verdict per flag set."""
  if probe is None:
    return None
  verdicts = {}
  for name, row in probe["flag_sets"].items():
    verdicts[name] = ("failed to run" if not row["ran"] else "bit for bit"
                      if row["same_across_processes"] else "in one process only"
                      if row["same_in_a_process"] else "differs")
  return {"attention": probe["attention"], "verdicts": verdicts, "probe": probe}


def gelu_summary(ablation: dict | None) -> dict | None:
  """Issue 60 item 4: model.gelu=recompute against the defaults (option_ablation.py's JSON,
  its first variant the defaults)."""
  if ablation is None:
    return None
  rows, first = ablation["variants"], ablation["first"]
  other = next((n for n, r in rows.items() if r["options"].get("gelu") == "recompute"), None)
  out = {"device": ablation["device"], "shape": ablation["shape"],
         "deterministic_gpu_ops": ablation.get("deterministic_gpu_ops"),
         "failed": ablation["failed"], "ablation": ablation}
  if other and first in rows:
    a, b = rows[first], rows[other]
    out.update(recompute_over_xla=b["vs_first"], xla_model_steps_per_s=a["model_steps_per_s"],
               recompute_model_steps_per_s=b["model_steps_per_s"],
               memory_gib={"xla": a["memory_gib"], "recompute": b["memory_gib"]},
               resolved=a["resolved"])
  return out


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
  for name, summary in (("paper", paper_summary), ("tiny", tiny_summary),
                        ("medium", medium_summary), ("mixed", mixed_summary)):
    step = steps[f"bench_{name}"]
    bench = load_json(step, read(work, f"bench_{name}.json"), f"bench_{name}")
    result[name] = summary(bench) if bench else step.get("why") or None
    if name in TORCH_TARGETS:
      versus(name, result, load_json(steps[f"torch_{name}"], read(work, f"torch_{name}.json"),
                                     f"torch_{name}"))
  result["plan"] = load_json(steps["plan"], read(work, "plan.json"), "plan --json")
  plans = {n: load_json(steps[n], read(work, f"{n}.json"), f"{n} --json")
           for n in ("plan_a5", "plan_a5_flops", "plan_smoke_flops", "ablation_paper")}
  result["ablation"] = plans["ablation_paper"]  # tools/gpu/option_ablation.py's JSON
  issue60 = {n: load_json(steps[n], read(work, f"{n}.json"), f"{n} --json")
             for n in ("settings", "a5_kill_rerun", "determinism", "gelu_paper", "reach_plan")}
  result["settings"] = issue60["settings"]  # tools/gpu/run_settings.py: run's, on this device
  kill, kill_step = issue60["a5_kill_rerun"], steps["a5_kill_rerun"]
  if kill is None and kill_step.get("rc") == 1:  # kill_rerun.py's verdict: exit 1, a JSON
    try:
      kill = json.loads(read(work, "a5_kill_rerun.json") or "")
    except ValueError:
      pass
  result["kill_rerun"] = kill
  if kill is not None and not kill.get("ok"):
    kill_step.update(status="failed", error=(
        f"killed mid-run {kill.get('killed_mid_run')}; same {kill.get('same')}; differences: "
        f"{kill.get('differences')}"))
  result["determinism"] = determinism_summary(issue60["determinism"])
  result["gelu"] = gelu_summary(issue60["gelu_paper"])
  reach_run = steps["reach_run"]
  result["reachability"] = {
      "plan": issue60["reach_plan"],
      "run": load_json(reach_run, read(work, "reach_run.json"), "reach_run --json")}
  result["a5_plan"] = (a5_hours(plans["plan_a5"], plans["plan_a5_flops"])
                       if plans["plan_a5"] and plans["plan_a5_flops"] else None)
  result["smoke_plan"] = (flops_vs_probed(result["plan"], plans["plan_smoke_flops"])
                          if result["plan"] and plans["plan_smoke_flops"] else None)
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


def settings_tag(result: dict) -> str:
  """Run's settings in a few words, beside every engine figure (run_settings.py's JSON)."""
  s = result.get("settings")
  if not s:
    return "[settings not recorded]"
  o = s["options"]
  return (f"[{'deterministic ops' if s['deterministic_gpu_ops'] else 'no deterministic ops'}, "
          f"f32 {s['matmul_precision']}, attention {o['attention']['resolved']}, remat "
          f"{o['remat']['resolved']}, gelu {o['gelu']['resolved']}]")


def summary_lines(result: dict) -> list[str]:
  lines = [f"gpu_check: {'ok' if result['ok'] else 'FAILED: ' + ', '.join(result['failed'])}"]
  tag = settings_tag(result)
  s = result.get("settings")
  if s:
    lines.append(f"  settings (as `run`; bench and option_ablation apply the same): XLA_FLAGS="
                 f"{s['xla_flags']!r}, matmul precision {s['matmul_precision']}, attention "
                 f"auto -> {s['options']['attention']['resolved']} at the paper shape, remat "
                 f"auto -> {s['options']['remat']['resolved']} on {s['device']['kind']} "
                 f"(jax {s['versions']['jax']})")
  dev = result["devices"].get("float32")
  if dev:
    lines.append(f"  devices: {dev['count']} x {dev['kind']} ({dev['platform']})")
  for dtype, dev in result["devices"].items():
    if dev and "matmul_peak_gflops" in dev:
      frac = dev.get("fraction_of_table_peak")
      lines.append(f"  matmul peak {dtype}: {dev['matmul_peak_gflops']:.0f} GFLOP/s"
                   + (f" ({100 * frac:.0f}% of the table's)" if frac else ""))
  for name in TORCH_TARGETS:
    v = result[name].get("versus_torch") if isinstance(result[name], dict) else None
    if v:
      lines.append(f"  {name}: engine {tag} / best torch ({v['best_torch']}) "
                   f"{v['engine_over_best_torch']:.2f} (target {v['target']}: "
                   f"{v['meets_target']}); one-model step / torch eager "
                   + (f"{v['sequential_over_eager']:.2f}" if v["sequential_over_eager"]
                      else "n/a"))
  if isinstance(result["paper"], dict):
    p = result["paper"]
    lines.append(f"  paper: {p['engine_tflops']:.1f} TFLOP/s, "
                 f"{100 * p['engine_fraction_of_peak']:.1f}% of the bf16 peak {tag}")
  k = result.get("kill_rerun")
  if k:
    resumed = k["runs"].get("rerun", {}).get("resumed")
    lines.append(f"  A5 smoke killed once and rerun {tag}: killed mid-run {k['killed_mid_run']}"
                 f" (checkpoints {k['runs'].get('killed', {}).get('checkpoint_steps_at_kill')})"
                 f", {'; '.join(resumed) if resumed else 'no resume'}: "
                 + ("same results bit for bit" if k["same"] else
                    f"DIFFERENT ({'; '.join((k.get('differences') or ['a run failed'])[:3])})"))
  d = result.get("determinism")
  if d:
    lines.append(f"  determinism with attention {d['attention']}: "
                 + "; ".join(f"{n}: {v}" for n, v in d["verdicts"].items()))
  g = result.get("gelu")
  if g and "recompute_over_xla" in g:
    lines.append(f"  gelu recompute / xla {g['recompute_over_xla']:.3f} "
                 f"({g['recompute_model_steps_per_s']:.1f} vs {g['xla_model_steps_per_s']:.1f} "
                 f"model-steps/s; memory {g['memory_gib']['recompute']:.2f} vs "
                 f"{g['memory_gib']['xla']:.2f} GiB) at {g['shape']['width']}x"
                 f"{g['shape']['depth']}, {g['shape']['dtype']} {tag}")
  elif g:
    lines.append(f"  gelu: a variant failed: {list(g['failed'])}")
  if result["a5_plan"]:
    a = result["a5_plan"]
    lines.append(f"  a5_depth probed at depths {a['probed_depths']}: {a['probed_h100_hours']:.1f} "
                 f"GPU-h on {a['device'].get('kind', '?')} {tag} (target {a['target']}: "
                 f"{a['meets_target']}); plan --device h100 "
                 f"{a['flops_plan_hours']:.1f} h = {a['flops_over_probed']:.2f}x")
  if result["smoke_plan"]:
    lines.append(f"  quickstart smoke: plan --device h100 / probed "
                 f"{result['smoke_plan']['flops_over_probed']:.2f}")
  if isinstance(result["tiny"], dict):
    t = result["tiny"]
    lines.append(f"  tiny x{t['models']} {tag}: engine/sequential {t['engine_over_sequential']:.2f} "
                 f"(target {t['target']}: {t['meets_target']})")
  if isinstance(result["medium"], dict):
    m = result["medium"]
    lines.append(f"  medium {m['dtype']} {tag}: engine at {100 * m['engine_fraction_of_peak']:.1f}% "
                 f"of peak (target {m['target']}: {m['meets_target']})")
  r = result.get("reachability") or {}
  if r.get("plan"):
    lines.append(f"  reachability plan (probed): {r['plan']['est_train_s'] / 60:.1f} min "
                 f"training + {r['plan'].get('compile_s', 0) / 60:.1f} min compiling")
  if r.get("run"):
    run = r["run"]
    lines.append(f"  reachability {tag}: " + (
        f"lengths {run['lengths']} run, exit {run['rc']} after {run['s']} s (est "
        f"{run['est_s']:.0f} s), {len(run.get('rows') or [])} models" if run["ran"]
        else f"not run: {run['why']}"))
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
