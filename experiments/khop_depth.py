# Run: depthscale run --config experiments/khop_depth.py --workdir runs/khop_depth
#      (smoke: --config experiments/khop_depth.py:smoke)
"""Sanford, Hsu & Telgarsky: k-hop induction heads, k in 0..16 per sequence (prefix
token), 4 letters, N = 100; GPT-2 style, width 128 (4 heads) and 256 (8 heads),
depths 2-6; AdamW 1e-4, 1000 warm-up steps then linear decay, batch 32, 100k steps.
Theory: 2 + ceil(log2 k) layers suffice.
"""
from depthscale import config


def get_config(arg=None):
  args = config.study_args(arg, ("smoke",))
  c = config.defaults()
  c.name = "khop_depth"
  c.task, c.task_options = "khop", {"k": None, "k_max": 16, "alphabet": 4}
  c.grid.update(dict(depth=[2, 3, 4, 5, 6], width=[128, 256], seed=[0], lr=[1e-4],
                     length=[100], repeats=[1]))
  c.model.update(dict(head_dim=32, pos="learned", compute_dtype="bfloat16"))  # accelerator scale
  c.train.update(dict(batch_size=32, steps=100_000, steps_per_call=1000, warmup=1000,
                      decay="linear", weight_decay=0.01))
  c.checkpoint_every = 10_000
  return config.smoke(c, length=24) if "smoke" in args else c
