# Run: depthscale run --config experiments/looped_a5.py --workdir runs/looped_a5
#      (smoke: --config experiments/looped_a5.py:smoke)
"""The model of the theory: a looped transformer whose 2-layer block repeats r times,
r in {1, 2, 4, 8, 16} ~ c log2 n, on the A5 word problem up to length 128 (the
experiment the paper's authors could not afford). Width 256, 3 seeds.
"""
from depthscale import config


def get_config(arg=None):
  args = config.study_args(arg, ("smoke",))
  c = config.defaults()
  c.name = "looped_a5"
  c.task, c.task_options = "word_problem", {"group": "A5"}
  c.grid.update(dict(depth=[2], repeats=[1, 2, 4, 8, 16], width=[256], seed=[0, 1, 2],
                     lr=[1e-4], length=[128]))
  c.model.update(dict(heads=8, pos="learned", compute_dtype="bfloat16"))  # accelerator scale
  c.train.update(dict(batch_size=128, steps=400_000, steps_per_call=1000, warmup=1000,
                      weight_decay=0.01, curriculum="adaptive"))
  c.checkpoint_every = 20_000
  if "smoke" in args:
    c = config.smoke(c, depths=(1,))
    c.grid.repeats = [1, 2, 4]
  return c
