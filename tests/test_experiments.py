"""Every study config loads, validates and plans; its smoke variant is small but real."""
import glob
import math
import os

import pytest

from conftest import planned
from depthscale import config

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILES = sorted(glob.glob(os.path.join(ROOT, "experiments", "*.py")))
ARGS = {"retrieval_layers.py": ["ic", "nonic"], "reachability_depth.py": [None, "cycles", "vertices", "distance"],
        "a5_depth.py": [None, "gen"], "a5_width.py": [None, "gen"],
        "looped_a5.py": [None, "gen"]}


def test_the_studies_of_the_brief_exist():
  names = {os.path.basename(f) for f in FILES}
  assert {"quickstart.py", "a5_depth.py", "a5_width.py", "khop_depth.py",
          "retrieval_layers.py", "reachability_depth.py", "looped_a5.py"} <= names


@pytest.mark.parametrize("path", FILES, ids=os.path.basename)
def test_config_plans_and_smoke_is_small(path):
  first = open(path).readline()
  assert first.startswith("#") and ("depthscale run" in first or "make run" in first)
  for arg in ARGS.get(os.path.basename(path), [None]):
    full = config.load(path + (f":{arg}" if arg else ""))
    _, groups = planned(full)
    keys = [c.key for g in groups for c in g.cells]
    grid = full.grid  # every model of the grid planned once: the product of its axes
    axes = (grid.depth, grid.width, grid.seed, grid.lr, grid.length, grid.repeats)
    assert len(keys) == len(set(keys)) == math.prod(len(a) for a in axes)
    smoke_arg = f"{arg},smoke" if arg else "smoke"
    smoke = config.load(f"{path}:{smoke_arg}")
    _, groups = planned(smoke)
    models = [c for g in groups for c in g.cells]
    assert len(models) >= 6 and len({c.spec.depth for c in models} |
                                    {c.spec.repeats for c in models}) >= 2
    assert smoke.train.steps // smoke.checkpoint_every >= 3  # checkpoints several times
    assert smoke.train.steps * smoke.train.batch_size <= 300 * 16


def test_paper_fits_recorded():
  c = config.load(os.path.join(ROOT, "experiments", "a5_depth.py"))
  assert (c.paper_fit.slope, c.paper_fit.intercept) == (4.8, -15.8)
  c = config.load(os.path.join(ROOT, "experiments", "a5_width.py"))
  assert (c.paper_fit.slope, c.paper_fit.intercept) == (7.2, -41.7)


@pytest.mark.parametrize("path", [f for f in FILES if not f.endswith("quickstart.py")],
                         ids=os.path.basename)
def test_cpu_variant_has_an_axis_of_three_and_two_seeds_and_claims(path):
  for arg in ARGS.get(os.path.basename(path), [None]):
    c = config.load(f"{path}:{arg},cpu" if arg else f"{path}:cpu")
    _, groups = planned(c)
    g = c.grid
    assert max(len(g.depth), len(g.width), len(g.repeats), len(g.length)) >= 3
    assert len(g.seed) >= 2 and c.model.compute_dtype == "float32"
    assert c.report.claims and all({"kind", "claim", "paper"} <= set(x) for x in c.report.claims)
    for name, spec in c.report.companions.items():
      planned(config.load(spec))  # a companion study loads and plans too


def test_lr_width_scales_each_models_rate_like_one_over_its_width():
  """grid.lr_width=32: grid.lr is the rate at width 32; width w trains at lr * 32 / w
  (a5_width.py:cpu sets 64)."""
  from depthscale.sweep import grid as grid_lib
  path = os.path.join(ROOT, "experiments", "a5_width.py:cpu")
  c = config.load(path, ["grid.lr_width=32", "grid.lr=[0.003, 0.001]",
                         "grid.width=[16, 32, 64, 128]"])
  got = {(x.spec.width, x.spec.lr) for x in grid_lib.cells(c)}
  assert got == {(w, lr * 32 / w) for w in (16, 32, 64, 128) for lr in (0.003, 0.001)}
  assert {x.spec.lr for x in grid_lib.cells(config.load(path))} == {0.024, 0.012, 0.006,
                                                                     0.003}  # widths 8-64
  assert {x.spec.lr for x in grid_lib.cells(config.load(path, ["grid.lr_width=0"]))} == {0.003}
