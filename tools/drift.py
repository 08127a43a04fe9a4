"""The numbers the drift guard (tests/test_drift.py) holds the code to, and their recorder.

A few dozen float64 training steps of small studies, through the path a run takes (the
study's config -> its plan's first group -> its Blueprint -> program.build -> the program's
dispatch): each model's loss at every step, its parameters' norm at the end and its
held-out loss. The samplers, the initialisation, the model, the optimizer and the
held-out evaluation all feed these numbers, so a change to any of them moves them by far
more than another CPU's rounding does (float64: ~1e-12 after this many steps).

Re-record, when a change is meant to move the studies' numbers:
    .venv/bin/python tools/drift.py        (writes tests/drift.json)
and say in the commit which change moved them and why.
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys

import jax
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECORD = os.path.join(ROOT, "tests", "drift.json")
COMMAND = ".venv/bin/python tools/drift.py"
STEPS = 24
MODELS = 3
# name -> (study, its overrides as on a command line): one task family each, small shapes
CASES = {
    "khop": ("experiments/quickstart.py:smoke", ()),
    "word_problem": ("experiments/a5_depth.py:cpu,smoke", ()),
    "retrieval": ("experiments/retrieval_layers.py:cpu,smoke", ()),
}


def _blueprint(spec: str, overrides):
  from depthscale import config
  from depthscale.core import program
  from depthscale.sweep import plan, study
  c = config.load(os.path.join(ROOT, spec), list(overrides))
  s = study.resolve(c)
  g = plan.make_plan(s)[0]
  bp = s.program(g)
  options = {**bp.model_options, "dtype": "float64", "compute_dtype": "float32"}
  return dataclasses.replace(bp, models=bp.models[:MODELS], steps_per_call=STEPS,
                             options=tuple(sorted(options.items())))


def measure(name: str) -> dict:
  """{loss: [STEPS][models], param_norm: [models], eval_loss: [models]} of case `name`."""
  from depthscale.core import metrics, program
  with jax.enable_x64(True), jax.default_matmul_precision("highest"):
    bp = _blueprint(*CASES[name])
    prog = program.build(bp, jax.local_devices()[:1])
    state, met = prog.run(prog.state, prog.hp, prog.arch, np.int32(STEPS))
    n = len(bp.models)
    norms = [float(np.sqrt(sum(np.sum(np.square(np.asarray(x[m], np.float64)))
                               for x in jax.tree.leaves(state.params)))) for m in range(n)]
    batch = metrics.held_out(bp.task, bp.tcfg.length, 64)
    res = metrics.make_evaluate(bp.task, prog.cfg)(state.params, prog.arch, batch)
    return dict(models=[str(s) for s in bp.models],
                loss=np.asarray(met["loss"], np.float64)[:, :n].tolist(),
                param_norm=norms, eval_loss=np.asarray(res["loss"], np.float64)[:n].tolist())


def main() -> int:
  out = dict(about=f"float64, {STEPS} steps; re-record with: {COMMAND}",
             jax=jax.__version__, cases={name: measure(name) for name in CASES})
  with open(RECORD, "w") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
  print(f"wrote {os.path.relpath(RECORD, ROOT)}: {', '.join(CASES)}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
