"""The `refill` bench preset: the quickstart's grid with 4 seeds per depth trained to the
end twice in one process, static (every model its whole budget, all at once) and
continuous (train.slots, a stopping rule, freed slots refilled), each in a fresh
temporary workdir through the study runner: wall time, model-steps and the depth fit.

Imports config, sweep (study, runner) and report (fits.json via build_report).
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from typing import Callable

from depthscale import config as config_lib

QUICKSTART = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "experiments", "quickstart.py")
SEEDS = [0, 1, 2, 3]
CONTINUOUS = ["train.slots=8", "train.stop=plateau", "train.stop_every=200",
              "train.patience=5"]
SHRINK: list[str] = []  # tests set a tiny size here (overrides applied to both ways)


def run_refill(log: Callable[[str], None] = print) -> dict:
  """{"static": {...}, "continuous": {...}, "wall_ratio", "model_steps_ratio"}; each way
  {"wall_s", "model_steps", "budget", "slope", "slope_ci"} (the depth fit of the best
  seed's n*, its bootstrap 95% interval)."""
  from depthscale.report import build_report
  from depthscale.sweep import runner, study as study_lib
  if not os.path.isfile(QUICKSTART):
    raise FileNotFoundError(f"the refill preset trains {QUICKSTART} (a clone's experiments/)")
  out = {}
  for way, extra in (("static", []), ("continuous", CONTINUOUS)):
    c = config_lib.load(QUICKSTART, [f"grid.seed={SEEDS}", "wandb.mode=disabled", *extra,
                                     *SHRINK])
    study = study_lib.resolve(c)
    workdir = tempfile.mkdtemp(prefix=f"depthscale-refill-{way}-")
    try:
      log(f"bench refill: {way} ({', '.join(extra) or 'every model its whole budget'})")
      t0 = time.perf_counter()
      rows = runner.run(study, workdir, progress=False, report=False, signals=False)
      wall = time.perf_counter() - t0
      build_report(workdir)
      with open(os.path.join(workdir, "fits.json")) as f:
        fit = json.load(f)["fits"]["depth_vs_log2_nstar"]["best"]
    finally:
      shutil.rmtree(workdir, ignore_errors=True)
    from depthscale.report.fits import model_steps
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
