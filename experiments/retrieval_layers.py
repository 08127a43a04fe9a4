# Run: depthscale run --config experiments/retrieval_layers.py:ic --workdir runs/retrieval_ic
#      (non-IC: :nonic; smoke: :ic,smoke or :nonic,smoke)
"""Musat: the retrieval problem, minimal formulation (N=4 chains, K=4 dims).
IC (implicit curriculum, D=5) succeeds with enough layers; non-IC (D=3) fails in all
runs (final loss > 0.7). 1-8 layers x 8 seeds, width 128, 8 heads, Adam lr 1e-3,
decoupled weight decay 0.1, batch 512, 10k steps, no positional embedding beyond the
task's own code.
"""
from depthscale import config


def get_config(arg=None):
  args = config.study_args(arg, ("ic", "nonic", "smoke"), exclusive=(("ic", "nonic"),))
  ic = "nonic" not in args
  c = config.defaults()
  c.name = "retrieval_ic" if ic else "retrieval_nonic"
  c.task = "retrieval"
  c.task_options = {"chains": 4, "dim": 4, "implicit_curriculum": ic}
  c.grid.update(dict(depth=list(range(1, 9)), width=[128], seed=list(range(8)), lr=[1e-3],
                     length=[5 if ic else 3], repeats=[1]))
  c.model.update(dict(heads=8, pos="none", compute_dtype="bfloat16"))  # accelerator scale
  c.train.update(dict(batch_size=512, steps=10_000, steps_per_call=500, weight_decay=0.1,
                      clip_norm=0.0))
  c.checkpoint_every = 2000
  if "smoke" in args:
    c = config.smoke(c, length=c.grid.length[0])
  return c
