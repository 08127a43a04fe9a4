# Run: depthscale run --config experiments/looped_a5.py --workdir runs/looped_a5
#      (CPU scale, standard models beside it: :cpu; generators at paper scale: :gen;
#      smoke: :smoke)
"""The model of the theory: a looped transformer whose 2-layer block repeats r times,
r in {1, 2, 4, 8, 16} ~ c log2 n, on the A5 word problem up to length 128 (the
experiment the paper's authors could not afford). Width 256, 3 seeds. `gen`: words over
A5's generators (as a5_depth.py) at paper scale.
`cpu`: generators, a 1-layer block repeated 1, 2, 3 times x 2 seeds, beside standard
models of depth 1-3 (a5_depth.py:cpu, same sizes) in WORKDIR/standard: the same
effective depth, and (depth 1) the same parameter count.
Stopping rule: none (train.stop), at every size: no run has shown another keeps the claims.
"""
import os

from depthscale import config

CLAIMS = [dict(kind="improves", axis="repeats", measure="n_star",
               claim="more repeats of the same block, longer sequences solved (best seed n*)",
               paper="Theorem 1: O(log n) repeats of a fixed block recognise any regular "
                     "language (not run by the authors)")]
SAME_PARAMS = dict(kind="beats_companion", companion="standard", measure="n_star",
                   companion_where={"depth": 1},
                   claim="a looped model beats the standard model with the same parameters "
                         "(depth 1)",
                   paper="looping adds depth without parameters")


def get_config(arg=None):
  args = config.study_args(arg, ("cpu", "gen", "smoke"))
  c = config.defaults()
  c.name = "looped_a5" + ("-gen" if "gen" in args else "")
  c.task, c.task_options = "word_problem", {"group": "A5"}
  if "gen" in args or "cpu" in args:  # A5's generators (0 1 2 3 4), (0 1 2) and the identity
    c.task_options.inputs = "generators"
  c.grid.update(dict(depth=[2], repeats=[1, 2, 4, 8, 16], width=[256], seed=[0, 1, 2],
                     lr=[1e-4], length=[128]))
  c.model.update(dict(heads=8, pos="learned", compute_dtype="bfloat16"))  # accelerator scale
  c.train.update(dict(batch_size=128, steps=400_000, steps_per_call=1000, warmup=1000,
                      weight_decay=0.01, curriculum="adaptive"))
  c.checkpoint_every = 20_000
  c.report.claims = list(CLAIMS)
  if "cpu" in args:  # the sizes of a5_depth.py:cpu, so that its models stand beside these
    c = config.cpu_scale(c)
    c.grid.update(dict(depth=[1], repeats=[1, 2, 3], width=[64], seed=[0, 1], lr=[3e-3],
                       length=[32]))
    c.model.heads = 4
    c.train.update(dict(batch_size=64, steps=1500, steps_per_call=100, warmup=0))
    c.checkpoint_every = 500
    smoke = ",smoke" if "smoke" in args else ""
    standard = os.path.join(os.path.dirname(__file__), "a5_depth.py")
    c.report.companions = {"standard": f"{standard}:cpu{smoke}"}
    c.report.claims = list(CLAIMS) + [SAME_PARAMS]
  if "smoke" in args:
    c = config.smoke(c, depths=(1,))
    c.grid.repeats = [1, 2, 4]
  return c
