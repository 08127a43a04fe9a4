# Run: depthscale run --config experiments/a5_depth.py --workdir runs/a5_depth
#      (smoke: --config experiments/a5_depth.py:smoke)
"""Merrill & Sabharwal, depth sweep: A5 word problem, width 512, depths 6..24, 3 seeds.

Curriculum 2, 4, ..., 128; ~100M training sequences (batch 128 x 800k steps); AdamW
lr 1e-4, weight decay 0.01. Published fit: d = 4.8 log2(n*) - 15.8 (r^2 = 0.93).
"""
from depthscale import config


def get_config(arg=None):
  args = config.study_args(arg, ("smoke",))
  c = config.defaults()
  c.name = "a5_depth"
  c.task, c.task_options = "word_problem", {"group": "A5"}
  c.grid.update(dict(depth=[6, 9, 12, 15, 18, 21, 24], width=[512], seed=[0, 1, 2],
                     lr=[1e-4], length=[128], repeats=[1]))
  c.model.update(dict(heads=8, pos="learned", compute_dtype="bfloat16"))  # accelerator scale
  c.train.update(dict(batch_size=128, steps=800_000, steps_per_call=1000, warmup=1000,
                      weight_decay=0.01, curriculum="adaptive", advance_at=0.95))
  c.checkpoint_every = 20_000
  c.paper_fit.update(dict(kind="depth", slope=4.8, intercept=-15.8, r2=0.93,
                          source="Merrill & Sabharwal 2025, depth sweep at width 512"))
  return config.smoke(c) if "smoke" in args else c
