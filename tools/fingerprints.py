"""The lowered programs' fingerprints of four groups (padded, compacted, queued, halving) of
the quickstart's smoke study, each trained for a few steps through train_group; a refactor
that leaves the programs alone prints the same four. Run: .venv/bin/python tools/fingerprints.py"""
import sys, jax
from depthscale import config
from depthscale.sweep import plan, study as study_lib
from depthscale.sweep.train_group import train_group
SMOKE = "experiments/quickstart.py:smoke"
TINY = ["train.steps=40", "train.steps_per_call=20", "checkpoint_every=20"]
CASES = {
  "padded": ["grid.depth=[1, 2]", "grid.seed=[0]", "plan.strategy='pad'"],
  "compacted": ["grid.depth=[1, 2]", "grid.seed=[0]", "plan.strategy='compact'"],
  "queued": ["grid.depth=[1, 2]", "grid.seed=[0, 1, 2]", "plan.strategy='pad'", "train.slots=2", "train.stop='plateau'", "train.stop_every=20"],
  "halving": ["grid.depth=[1]", "grid.seed=[0, 1]", "grid.lr=[1e-3, 3e-3, 1e-2]", "plan.strategy='pad'", "train.stop='halving'", "train.stop_every=10", "train.steps_per_call=10", "train.steps=90"],
}
for name, over in CASES.items():
  c = config.load(SMOKE, TINY + over)
  st = study_lib.resolve(c)
  st.start_jax()
  gs = plan.make_plan(st)
  g = gs[0]
  devs = jax.local_devices()[:1]
  res = train_group(st.task, g.specs, st.train_config(g), steps_per_call=c.train.steps_per_call,
                    eval_size=8, model_options=st.model_options(g), progress=False, devices=devs,
                    stop=st.stop_rule(), slots=c.train.slots)
  print(name, len(gs), len(g.specs), g.layout, res.fingerprint, flush=True)
