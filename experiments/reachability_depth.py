# Run: depthscale run --config experiments/reachability_depth.py --workdir runs/reach
#      (smoke: --config experiments/reachability_depth.py:smoke)
"""Graph reachability (Merrill & Sabharwal, Theorem 2): log-depth transformers decide
it, fixed depth cannot as graphs grow. Random graphs with balanced labels, 8..64
vertices, depths 1-8, width 128. Arg `cycles`: the 1-vs-2-cycle family instead.
"""
from depthscale import config


def get_config(arg=None):
  args = config.study_args(arg, ("cycles", "smoke"))
  c = config.defaults()
  family = "cycles" if "cycles" in args else "random"
  c.name = f"reachability_{family}_depth"
  c.task, c.task_options = "reachability", {"family": family}
  c.grid.update(dict(depth=[1, 2, 3, 4, 6, 8], width=[128], seed=[0, 1, 2], lr=[3e-4],
                     length=[8, 16, 32, 64], repeats=[1]))
  c.model.update(dict(heads=8, pos="learned", compute_dtype="bfloat16"))  # accelerator scale
  c.train.update(dict(batch_size=64, steps=50_000, steps_per_call=1000, warmup=1000,
                      weight_decay=0.01))
  c.checkpoint_every = 10_000
  return config.smoke(c, length=8) if "smoke" in args else c
