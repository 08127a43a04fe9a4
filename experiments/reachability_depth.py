# Run: depthscale run --config experiments/reachability_depth.py --workdir runs/reach
#      (1-vs-2 cycles: :cycles; CPU scale: :cpu or :cycles,cpu; smoke: :smoke)
"""Graph reachability (Merrill & Sabharwal, Theorem 2): log-depth transformers decide
it, fixed depth cannot as graphs grow. Random graphs with balanced labels, 8..64
vertices, depths 1-8, width 128. Arg `cycles`: the 1-vs-2-cycle family instead;
`vertices`: every vertex queried, each labelled reachable from s or not (n labels per
graph instead of one); `distance`: "yes" pairs balanced over their distance from s.
Measured per graph size (each model trains and is evaluated at one size): the accuracy
of its decision, and per depth the largest size solved; the fit is depth against log2
of that size. `cpu`: depths 1-4 x 2 seeds at width 32, 3 small sizes, 1000 steps: the
cheapest honest sizes, since nothing was learned at any CPU budget tried (BUILD_NOTES.md).
Stopping rule: none (train.stop): plateau would end these flat runs early, and the
evidence that nothing is learned would then be for a shorter budget (not measured).
"""
from depthscale import config

CLAIMS = [dict(kind="improves", axis="depth", measure="size_star",
               claim="more depth, larger graphs decided (largest size solved, best seed)",
               paper="Theorem 2: log-depth decides reachability; fixed depth cannot as "
                     "graphs grow (1-vs-2 cycles: Omega(log N) layers conjectured)"),
          dict(kind="fit_slope_positive", axis="depth",
               claim="depth grows with log2(largest size solved): slope positive (95% CI)",
               paper="depth = O(log n)")]


def get_config(arg=None):
  args = config.study_args(arg, ("cycles", "vertices", "distance", "cpu", "smoke"),
                           exclusive=(("cycles", "distance"), ("vertices", "distance")))
  c = config.defaults()
  family = "cycles" if "cycles" in args else "random"
  c.name = f"reachability_{family}_depth"
  c.task, c.task_options = "reachability", {"family": family}
  if "vertices" in args:  # a label per vertex: n decisions per graph instead of one
    c.name, c.task_options.query = c.name + "-vertices", "vertices"
  if "distance" in args:  # "yes" pairs balanced over their distance
    c.name, c.task_options.balance = c.name + "-distance", "distance"
  c.grid.update(dict(depth=[1, 2, 3, 4, 6, 8], width=[128], seed=[0, 1, 2], lr=[3e-4],
                     length=[8, 16, 32, 64], repeats=[1]))
  c.model.update(dict(heads=8, pos="learned", compute_dtype="bfloat16"))  # accelerator scale
  c.train.update(dict(batch_size=64, steps=50_000, steps_per_call=1000, warmup=1000,
                      weight_decay=0.01))
  c.checkpoint_every = 10_000
  c.report.claims = list(CLAIMS)
  if "cpu" in args:
    c = config.cpu_scale(c)
    c.grid.update(dict(depth=[1, 2, 3, 4], width=[32], seed=[0, 1], lr=[1e-3],
                       length=[4, 8, 12] if family == "cycles" else [6, 8, 12]))
    c.model.heads = 4
    c.train.update(dict(batch_size=32, steps=1000, steps_per_call=100, warmup=0))
    c.checkpoint_every = 500
  if "smoke" in args:
    sizes = list(c.grid.length)[:2] if "cpu" in args else None
    c = config.smoke(c, length=8)
    if sizes:
      c.grid.length = sizes
  return c
