"""The `refill` and `halving` bench presets: the quickstart's grid trained to the end
twice in one process, each way in a fresh temporary workdir through the study runner.

refill   4 seeds per depth, static (every model its whole budget, all at once) against
         continuous (train.slots, a stopping rule, freed slots refilled): wall time,
         model-steps and the depth fit.
halving  3 learning rates per depth (the quickstart's 2 seeds), the full sweep against
         train.stop=halving: model-steps, wall time and each depth's best k* and n*.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from typing import Callable

from depthscale import config as config_lib
from depthscale.bench import registry

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
QUICKSTART = os.path.join(ROOT, "experiments", "quickstart.py")
SEEDS = [0, 1, 2, 3]
CONTINUOUS = ["train.slots=8", "train.stop=plateau", "train.stop_every=200",
              "train.patience=5"]
LRS = [1e-3, 3e-3, 1e-2]  # halving: the quickstart's 3e-3, a third below and above
ROW = ("depth", "lr", "seed", "k_star", "n_star", "eval_loss", "trained_steps", "stop")
SHRINK: dict[str, list[str]] = {}  # tests: preset -> overrides for a tiny size (both ways)


def _train(preset: str, way: str, overrides: list[str], log) -> tuple[list[dict], dict, float]:
  """One way through the runner in a temporary workdir: (rows, fits.json, wall s)."""
  from depthscale.report import build_report
  from depthscale.sweep import runner, study as study_lib
  if not os.path.isfile(QUICKSTART):
    raise FileNotFoundError(f"the bench trains {QUICKSTART} (a clone's experiments/)")
  c = config_lib.load(QUICKSTART, ["wandb.mode=disabled", *overrides,
                                   *SHRINK.get(preset, [])])
  study = study_lib.resolve(c)
  workdir = tempfile.mkdtemp(prefix=f"depthscale-bench-{way}-")
  try:
    log(f"bench: {way} ({', '.join(overrides)})")
    t0 = time.perf_counter()
    rows = runner.run(study, workdir, progress=False, report=False, signals=False)
    wall = time.perf_counter() - t0
    build_report(workdir)
    with open(os.path.join(workdir, "fits.json")) as f:
      fits = json.load(f)["fits"]
  finally:
    shutil.rmtree(workdir, ignore_errors=True)
  return rows, fits, wall


def best_per_depth(rows, field: str) -> dict:
  """Each depth's best value of `field` over its measured models (lrs and seeds)."""
  out: dict = {}
  for r in rows:
    if r.get(field) is not None:
      out[r["depth"]] = max(out.get(r["depth"], r[field]), r[field])
  return dict(sorted(out.items()))


def run_halving(log: Callable[[str], None] = print) -> dict:
  """{"full": {...}, "halving": {...}, "model_steps_share", "same_best_k_star",
  "same_best_n_star"}; each way {"wall_s", "model_steps", "budget", "best_k_star",
  "best_n_star"} (per depth, the best over learning rates and seeds), "rows" (each
  model's ROW fields)."""
  from depthscale.report.fits import model_steps
  out = {}
  for way, extra in (("full", []), ("halving", ["train.stop=halving"])):
    rows, _, wall = _train("halving", way, [f"grid.lr={LRS}", *extra], log)
    trained, budget = model_steps(rows)
    out[way] = dict(wall_s=wall, model_steps=trained, budget=budget, models=len(rows),
                    best_k_star=best_per_depth(rows, "k_star"),
                    best_n_star=best_per_depth(rows, "n_star"),
                    rows=[{k: r.get(k) for k in ROW} for r in rows])
    log(f"bench halving: {way}: {wall:.1f} s, {trained} of {budget} model-steps, best k* "
        f"per depth {out[way]['best_k_star']}, best n* {out[way]['best_n_star']}")
  f, h = out["full"], out["halving"]
  out.update(model_steps_share=h["model_steps"] / max(f["model_steps"], 1),
             wall_ratio=f["wall_s"] / h["wall_s"],
             same_best_k_star=f["best_k_star"] == h["best_k_star"],
             same_best_n_star=f["best_n_star"] == h["best_n_star"])
  return out


def run_refill(log: Callable[[str], None] = print) -> dict:
  """{"static": {...}, "continuous": {...}, "wall_ratio", "model_steps_ratio"}; each way
  {"wall_s", "model_steps", "budget", "slope", "slope_ci"} (the depth fit of the best
  seed's n*, its bootstrap 95% interval)."""
  from depthscale.report.fits import model_steps
  out = {}
  for way, extra in (("static", []), ("continuous", CONTINUOUS)):
    rows, fits, wall = _train("refill", way, [f"grid.seed={SEEDS}", *extra], log)
    fit = fits["depth_vs_log2_nstar"]["best"]
    trained, budget = model_steps(rows)
    out[way] = dict(wall_s=wall, model_steps=trained, budget=budget, slope=fit.get("slope"),
                    slope_ci=(fit.get("ci95") or {}).get("slope"), models=len(rows))
    log(f"bench refill: {way}: {wall:.1f} s, {trained} of {budget} model-steps, depth fit "
        f"slope {out[way]['slope']} (95% CI {out[way]['slope_ci']})")
  s, c = out["static"], out["continuous"]
  ci = s["slope_ci"]
  out.update(wall_ratio=s["wall_s"] / c["wall_s"],
             model_steps_ratio=s["model_steps"] / max(c["model_steps"], 1),
             slope_inside_static_ci=bool(ci and c["slope"] is not None
                                         and ci[0] <= c["slope"] <= ci[1]))
  return out


def refill_summary(result: dict) -> str:
  s, c = result["static"], result["continuous"]
  return (f"static {s['wall_s']:.1f} s ({s['model_steps']} model-steps), continuous "
          f"{c['wall_s']:.1f} s ({c['model_steps']}): {result['wall_ratio']:.2f}x less wall "
          f"time; depth-fit slope {c['slope']} vs {s['slope']} (inside the static 95% "
          f"interval: {result['slope_inside_static_ci']})")


def halving_summary(result: dict) -> str:
  f, h = result["full"], result["halving"]
  return (f"full sweep {f['wall_s']:.1f} s ({f['model_steps']} model-steps), halving "
          f"{h['wall_s']:.1f} s ({h['model_steps']}, {100 * result['model_steps_share']:.0f}% "
          f"of the full sweep's); best k* per depth {h['best_k_star']} vs {f['best_k_star']} "
          f"(same: {result['same_best_k_star']})")


# two study runs each, on the devices `make run` would use
registry.register("refill", lambda o, log: run_refill(log), refill_summary, through_runner=True)
registry.register("halving", lambda o, log: run_halving(log), halving_summary,
                  through_runner=True)
