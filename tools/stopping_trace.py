"""What a stopping rule could save on the quickstart's grid without moving its fit.

Trains the quickstart (k-hop, depths 1-4, width 32, 4000 steps, compacted) with 4 seeds
per depth as one static program, reads every model's held-out n* every 200 steps (the
refill bench's stop_every), then replays rules on that trace: plateau with patience P
(an n* of 24 = the full length counts as solved), and `solved` alone. For each: the
model-steps and the layer-steps (a compacted slot costs depth + 1) it would train, the
best n* per depth and the depth fit's slope (report/fits, as the report computes it).

  .venv/bin/python tools/stopping_trace.py [--trace /tmp/trace.json]   (~6 min on 2 cores)

--trace reuses a saved trace (it is written there after training). BUILD_NOTES.md has
the figures.
"""
import argparse
import json
import os
import sys

import jax
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EVERY = 200


def trace(path: str) -> dict:
  from depthscale import config as config_lib
  from depthscale.core import metrics, program
  from depthscale.sweep import plan, study as study_lib
  c = config_lib.load(os.path.join(ROOT, "experiments", "quickstart.py"),
                      ["wandb.mode=disabled", "grid.seed=[0,1,2,3]"])
  study = study_lib.resolve(c)
  study.start_jax()
  (g,) = plan.make_plan(study)
  tcfg, k = study.train_config(g), c.train.steps_per_call
  bp = program.Blueprint.of(study.task, g.specs, tcfg, study.model_options(g), k)
  prog = program.build(bp)
  state, hp, arch = prog.state, prog.hp, prog.arch
  evaluate = metrics.make_evaluate(study.task, prog.cfg)
  held = metrics.held_out(study.task, tcfg.length, c.eval.size)
  mask_T = np.asarray(held.mask).any(0)
  back = prog.back if prog.back is not None else np.arange(len(g.specs))
  steps, n_star = [], []
  for at in range(k, tcfg.total_steps + 1, k):
    state, _ = prog.run(state, hp, arch, np.int32(k))
    if at % EVERY == 0:
      rows = metrics.summarize(jax.device_get(evaluate(state.params, arch, held)), mask_T,
                               c.eval.threshold)
      steps.append(at)
      n_star.append([int(rows[j]["n_star"]) for j in back][:len(g.specs)])
      print(at, n_star[-1], file=sys.stderr, flush=True)
  out = dict(depth=[s.depth for s in g.specs], seed=[s.seed for s in g.specs],
             length=tcfg.length, steps=steps, n_star=n_star)
  with open(path, "w") as f:
    json.dump(out, f)
  return out


def replay(t: dict, patience: int) -> dict:
  """Each model stops at the first check where n* = the length or n* has not improved
  for `patience` checks (0: never by plateau); its n* is the one at its stop."""
  from depthscale.report import fits
  rows, steps, layers = [], 0, 0
  for i, (d, seed) in enumerate(zip(t["depth"], t["seed"])):
    best, since, stop, n = -1, 0, t["steps"][-1], t["n_star"][-1][i]
    for at, ns in zip(t["steps"], t["n_star"]):
      since = 0 if ns[i] > best else since + 1
      best = max(best, ns[i])
      if ns[i] >= t["length"] or (patience and since >= patience):
        stop, n = at, ns[i]
        break
    rows.append(dict(task="khop", depth=d, width=32, seed=seed, lr=0.003, repeats=1,
                     length=t["length"], n_star=n))
    steps, layers = steps + stop, layers + stop * (d + 1)
  full = t["steps"][-1]
  fit = fits.depth_vs_log_nstar(rows, "best")
  best = {}
  for r in rows:
    best[r["depth"]] = max(best.get(r["depth"], 0), r["n_star"])
  return dict(model_steps=steps / (full * len(rows)),
              layer_steps=layers / (full * sum(d + 1 for d in t["depth"])),
              best_n_star=best, slope=fit.get("slope"),
              slope_ci=(fit.get("ci95") or {}).get("slope"))


def main():
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--trace", default="/tmp/stopping_trace.json")
  args = ap.parse_args()
  if os.path.exists(args.trace):
    with open(args.trace) as f:
      t = json.load(f)
  else:
    t = trace(args.trace)
  for p in (0, 3, 5, 8, 10):
    r = replay(t, p)
    name = f"plateau {p:2d}" if p else "solved    "
    ci = r["slope_ci"] and [round(x, 2) for x in r["slope_ci"]]
    print(f"{name}: model-steps {r['model_steps']:.2f}, layer-steps {r['layer_steps']:.2f}, "
          f"best n* {r['best_n_star']}, slope {r['slope']:.2f} {ci}")


if __name__ == "__main__":
  main()
