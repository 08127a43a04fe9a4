# Run: depthscale run --config experiments/a5_width.py --workdir runs/a5_width
#      (CPU scale: :cpu; generators at paper scale: :gen; smoke: :smoke)
"""Merrill & Sabharwal, width sweep: A5 word problem, depth 6, widths 128..1024, 3 seeds.

Published fit: n* = 7.2 log2(w) - 41.7 (r^2 = 0.98): width must grow like exp(n).
`gen`: words over A5's generators (as a5_depth.py) at paper scale. `cpu`: generators,
depth 2, widths 8-64 x 3 seeds, each width at its own learning rate (3e-3 at width 64,
scaled like 1/width: grid.lr_width; one rate for every width let the widest model drop
below the next on 2 of 3 seed pairs; at widths 16-128 width 128 added nothing over 64
and fell 1 below it on one seed pair; with 2 seeds a median fell once; sizes and
evidence in BUILD_NOTES.md).
Stopping rule: none (train.stop), at every size: no run has shown another keeps the fit.
"""
from depthscale import config

CLAIMS = [dict(kind="improves", axis="width", measure="n_star",
               claim="more width, longer sequences solved (best seed n*)",
               paper="widths 128..1024 at depth 6: n* grows with width"),
          dict(kind="fit_slope_positive", axis="width",
               claim="n* grows like log width: the width fit's slope is positive (95% CI)",
               paper="n* = 7.2 log2(w) - 41.7, r² 0.98")]


def get_config(arg=None):
  args = config.study_args(arg, ("cpu", "gen", "smoke"))
  c = config.defaults()
  c.name = "a5_width" + ("-gen" if "gen" in args else "")
  c.task, c.task_options = "word_problem", {"group": "A5"}
  if "gen" in args or "cpu" in args:  # A5's generators (0 1 2 3 4), (0 1 2) and the identity
    c.task_options.inputs = "generators"
  c.grid.update(dict(depth=[6], width=[128, 256, 512, 1024], seed=[0, 1, 2], lr=[1e-4],
                     length=[128], repeats=[1]))
  c.model.update(dict(heads=8, pos="learned", compute_dtype="bfloat16"))  # accelerator scale
  c.train.update(dict(batch_size=128, steps=800_000, steps_per_call=1000, warmup=1000,
                      weight_decay=0.01, curriculum="adaptive", advance_at=0.95))
  c.checkpoint_every = 20_000
  c.paper_fit.update(dict(kind="width", slope=7.2, intercept=-41.7, r2=0.98,
                          source="Merrill & Sabharwal 2025, width sweep at depth 6 "
                                 "(one letter per element)"))
  c.report.claims = list(CLAIMS)
  if "gen" in args or "cpu" in args:
    c.paper_fit.note = ("the paper's constants are for one letter per element (60 letters); "
                        "over generators (3 letters) the same width reaches other lengths: "
                        "compare the sign of the slope, not its size")
  if "cpu" in args:
    c = config.cpu_scale(c)
    c.grid.update(dict(depth=[2], width=[8, 16, 32, 64], seed=[0, 1, 2], lr=[3e-3],
                       length=[32], lr_width=64))  # 3e-3 at width 64, scaled like 1/width
    c.model.heads = 4
    c.train.update(dict(batch_size=64, steps=1500, steps_per_call=100, warmup=0))
    c.checkpoint_every = 500
  if "smoke" in args:
    c = config.smoke(c, depths=(1, 2))
    c.grid.width = [16, 32]
  return c
