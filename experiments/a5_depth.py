# Run: depthscale run --config experiments/a5_depth.py --workdir runs/a5_depth
#      (CPU scale, with the Z60 control beside it: :cpu; smoke: :smoke)
"""Merrill & Sabharwal, depth sweep: A5 word problem, width 512, depths 6..24, 3 seeds.

Curriculum 2, 4, ..., 128; ~100M training sequences (batch 128 x 800k steps); AdamW
lr 1e-4, weight decay 0.01. Published fit: d = 4.8 log2(n*) - 15.8 (r^2 = 0.93).
`control`: the abelian group Z60 (same size; TC0, so fixed depth suffices) instead of
A5 (NC1-complete). `cpu`: depths 1-4 x 2 seeds at width 32, with the control run beside
it in WORKDIR/control (sizes and evidence in BUILD_NOTES.md).
"""
from depthscale import config

CLAIMS = [dict(kind="improves", axis="depth", measure="n_star",
               claim="more depth, longer sequences solved (best seed n*)",
               paper="depth 6..24 at width 512: n* grows with depth"),
          dict(kind="fit_slope_positive", axis="depth",
               claim="depth grows like log n*: the depth fit's slope is positive (95% CI)",
               paper="d = 4.8 log2(n*) - 15.8, r² 0.93")]
CONTROL_CLAIM = dict(kind="more_than_companion", companion="control", axis="depth",
                     measure="n_star",
                     claim="depth buys more length for A5 than for the abelian control Z60 "
                           "(and Z60 is solved at least as far at the shallowest depth)",
                     paper="A5 is NC1-complete (needs depth ~ log n); abelian groups are in "
                           "TC0 (fixed depth suffices)")


def get_config(arg=None):
  args = config.study_args(arg, ("control", "cpu", "smoke"))
  c = config.defaults()
  group = "Z60" if "control" in args else "A5"
  c.name = "a5_depth" if group == "A5" else "z60_depth"
  c.task, c.task_options = "word_problem", {"group": group}
  c.grid.update(dict(depth=[6, 9, 12, 15, 18, 21, 24], width=[512], seed=[0, 1, 2],
                     lr=[1e-4], length=[128], repeats=[1]))
  c.model.update(dict(heads=8, pos="learned", compute_dtype="bfloat16"))  # accelerator scale
  c.train.update(dict(batch_size=128, steps=800_000, steps_per_call=1000, warmup=1000,
                      weight_decay=0.01, curriculum="adaptive", advance_at=0.95))
  c.checkpoint_every = 20_000
  if group == "A5":
    c.paper_fit.update(dict(kind="depth", slope=4.8, intercept=-15.8, r2=0.93,
                            source="Merrill & Sabharwal 2025, depth sweep at width 512"))
    c.report.claims = list(CLAIMS)
  if "cpu" in args:
    c = config.cpu_scale(c)
    c.grid.update(dict(depth=[1, 2, 3, 4], width=[32], seed=[0, 1], lr=[3e-3], length=[16]))
    c.model.heads = 4
    c.train.update(dict(batch_size=32, steps=2000, steps_per_call=100, warmup=0))
    c.checkpoint_every = 500
    if group == "A5":
      smoke = ",smoke" if "smoke" in args else ""
      c.report.companions = {"control": f"{__file__}:control,cpu{smoke}"}
      c.report.claims = list(CLAIMS) + [CONTROL_CLAIM]
  return config.smoke(c) if "smoke" in args else c
