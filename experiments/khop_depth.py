# Run: depthscale run --config experiments/khop_depth.py --workdir runs/khop_depth
#      (CPU scale: :cpu; smoke: --config experiments/khop_depth.py:smoke)
"""Sanford, Hsu & Telgarsky: k-hop induction heads, k in 0..16 per sequence (prefix
token), 4 letters, N = 100; GPT-2 style, width 128 (4 heads) and 256 (8 heads),
depths 2-6; AdamW 1e-4, 1000 warm-up steps then linear decay, batch 32, 100k steps.
Theory: 2 + ceil(log2 k) layers suffice.
`cpu`: k in 0..4, strings of 24, depths 1-4 x 2 seeds at width 32: the quickstart
(experiments/quickstart.py is this variant; evidence in BUILD_NOTES.md).
Stopping rule: none (train.stop), at every size: on `cpu` with 4 seeds, plateau (every 200,
patience 5) stopped depths 1-2 early and moved the depth fit's slope out of the static
run's 95% interval (BUILD_NOTES.md, Static vs continuous). The held-out n* of depths 1-3
still rises at step 4000 (tools/stopping_trace.py, retired after 40f3d78): only patience >= 10 or `solved` keep
every depth's best n*, and they save 12-14% of the layer-steps; not worth moving the
recorded figures (a rebuilt program rounds differently in float32).
`adaptive` (with `cpu,grow`): depths 1-5, grid.seed 0-3, 2000 steps, design.kind=adaptive:
the replay pool's settings (bench/data/khop_pool.json), seeds placed where the depth law's
interval is widest, up to design.budget of the grid's compute (BUILD_NOTES, Adaptive design).
`grow`: a model that solves every position of the grid's length grows to 2x and 4x it
(train.length_max), so that depth 4's n* (24 = the length on `cpu`) is measured, not
censored (BUILD_NOTES.md, "Lengths per stage and growth").
"""
from depthscale import config

# Published per-token errors, d = 256, 8 heads, infinite data (Sanford et al.)
PAPER = {"2": "k=1 0.003, k=2 0.033", "3": "k<=3 <=0.005, k=4 0.021",
         "4": "k<=7 <=0.007, k=8 0.015", "5": "k<=13 <=0.003, k=16 0.027",
         "6": "all k<=16 <=0.002"}


def claims(k_max: int) -> list[dict]:
  return [dict(kind="khop_bound", k_max=k_max,
               claim="depth d solves every k <= 2^(d-2) (2 + ceil(log2 k) layers suffice)",
               paper="depth 2: k=1; 3: k<=3; 4: k<=7; 5: k<=13; 6: k<=16 (error <= 0.007)"),
          dict(kind="improves", axis="depth", measure="k_star",
               claim="more depth, harder k solved (best seed k*)",
               paper="Omega(log k) layers needed (1-vs-2-cycle conjecture)")]


def get_config(arg=None):
  args = config.study_args(arg, ("cpu", "smoke", "grow", "adaptive"))
  c = config.defaults()
  c.name = "khop_depth"
  c.task, c.task_options = "khop", {"k": None, "k_max": 16, "alphabet": 4}
  c.grid.update(dict(depth=[2, 3, 4, 5, 6], width=[128, 256], seed=[0], lr=[1e-4],
                     length=[100], repeats=[1]))
  c.model.update(dict(head_dim=32, pos="learned", compute_dtype="bfloat16"))  # accelerator scale
  c.train.update(dict(batch_size=32, steps=100_000, steps_per_call=1000, warmup=1000,
                      decay="linear", weight_decay=0.01))
  c.checkpoint_every = 10_000
  c.report.paper_table = PAPER
  if "cpu" in args:
    c = config.cpu_scale(c)
    c.task_options.k_max = 4
    c.grid.update(dict(depth=[1, 2, 3, 4], width=[32], seed=[0, 1], lr=[3e-3], length=[24]))
    c.model.heads = 2
    c.train.update(dict(batch_size=32, steps=4000, steps_per_call=100, warmup=200,
                        decay="constant"))
    c.checkpoint_every = 1000
    c.plan.strategy = "compact"  # measured faster than pad for these depths (BUILD_NOTES)
  c.report.claims = claims(c.task_options.k_max)
  c = config.smoke(c, length=24) if "smoke" in args else c
  if "grow" in args:
    c.train.length_max = 4 * max(c.grid.length)
  if "adaptive" in args:  # with cpu,grow: the design benchmark's pool, placed adaptively
    c.grid.update(dict(depth=[1, 2, 3, 4, 5], seed=[0, 1, 2, 3]))
    c.train.steps = 2000
    c.design.kind = "adaptive"
  return c
