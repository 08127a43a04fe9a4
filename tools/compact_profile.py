"""Where a compacted group's time goes, against one program per depth (issue 10).

On the bench's mixed grid (depths 1..8 x 4 models, width 64), times in interleaved rounds
(medians of per-dispatch seconds): the compacted group (4 bands, as run) and with an exact
profile (8 bands); 32 models all at depth 1 and all at depth 8 in one program (the
fixed per-step cost of 32 models and the cost of one layer on 32 models); and each
depth's own 4-model program (bucket). Fits t = fixed + layers x per-layer on each, so the
gap between compact and bucket splits into fixed costs, per-layer costs and what the
bands add.  Usage: python tools/compact_profile.py OUT.json
"""
import dataclasses
import json
import statistics
import sys

import jax
import numpy as np

from depthscale import tasks
from depthscale.bench import mixed, shapes
from depthscale.bench.programs import make_engine
from depthscale.model import compact


def main(out):
  p, task = mixed.MIXED, tasks.make(shapes.TASK, **shapes.TASK_OPTIONS)
  specs = mixed.mixed_specs()
  devs = jax.local_devices()[:1]
  log = lambda s: print(s, file=sys.stderr)
  uniform = lambda d: [dataclasses.replace(s, depth=d) for s in specs]
  runs = {"compact": make_engine(task, p, specs, devs, log, layout="compact",
                                 name="compact")[0]}
  bands = compact.bands
  compact.bands = lambda costs, max_bands=8: bands(costs, 8)  # one band per depth
  runs["compact_exact"] = make_engine(task, p, specs, devs, log, layout="compact",
                                      name="exact")[0]
  compact.bands = bands
  runs["all_depth1"] = make_engine(task, p, uniform(1), devs, log, name="d1")[0]
  runs["all_depth8"] = make_engine(task, p, uniform(8), devs, log, name="d8")[0]
  per = len(mixed.MIXED_SEEDS) * len(mixed.MIXED_LRS)
  for i in range(0, len(specs), per):
    runs[f"bucket_d{specs[i].depth}"] = make_engine(
        task, p, specs[i:i + per], devs, log, name=f"bucket d{specs[i].depth}")[0]
  times = {k: [] for k in runs}
  for r in range(p.rounds):
    for k, dispatch in runs.items():
      times[k].append(dispatch() / p.engine_k)
  t = {k: statistics.median(v) for k, v in times.items()}
  depths = np.array(mixed.MIXED_DEPTHS, float)
  bucket = np.array([t[f"bucket_d{int(d)}"] for d in depths])
  b_per_layer, b_fixed = np.polyfit(depths, bucket, 1)
  big_per_layer = (t["all_depth8"] - t["all_depth1"]) / 7
  big_fixed = t["all_depth1"] - big_per_layer
  layers = compact.computed_layers(compact.profile([(s.depth, s.repeats) for s in specs], 1))
  useful = int(sum(s.depth for s in specs))
  res = {"step_s": t, "bucket_total_step_s": float(bucket.sum()),
         "bucket_fit": {"fixed_s_per_program_of_4": b_fixed,
                        "per_layer_s_per_4_models": b_per_layer},
         "one_program_of_32": {"fixed_s": big_fixed, "per_layer_s_per_32_models": big_per_layer},
         "model_layers": {"useful": useful, "compact_computed": layers},
         "predicted_compact_s": big_fixed + big_per_layer * layers / len(specs),
         "compact_over_bucket_speed": float(bucket.sum()) / t["compact"],
         "how": "medians over rounds of seconds per step; fits: bucket t_d = fixed + d x "
                "per_layer over depths 1..8; one program: all-depth-1 and all-depth-8"}
  with open(out, "w") as f:
    json.dump(res, f, indent=1)
  print(json.dumps(res, indent=1))


if __name__ == "__main__":
  main(sys.argv[1])
