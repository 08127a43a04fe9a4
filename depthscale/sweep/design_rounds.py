"""An adaptive study in a workdir: its candidate models, its first round (plan.json), and
the decision at each round barrier (report/design.py), appended as design/round-<k>.json.

A decision is made only when every model of the rounds so far has finished, from their
recorded results alone, with compute priced by FLOPs (never by measured time), so a study
killed anywhere and rerun makes the same decisions; a round's file is written once (the
first writer wins) and nothing trained is moved or retrained. Companion studies are
resolved from their own configs and stay grids.
"""
from __future__ import annotations

import dataclasses
import math
import os
import signal
import sys

from depthscale.config.design import settings as design_settings
from depthscale.io import design_files
from depthscale.report import cell_law, design
from depthscale.sweep import grid, plan, plan_file


def is_adaptive(study) -> bool:
  return study.config.design.kind == "adaptive"


def depths(study) -> list[int]:
  return list(study.config.grid.depth)


def candidates(study) -> dict[int, list]:
  """Per depth, the cells a design may train, in order: grid.seed, then seeds after its
  largest, up to design.max_seeds."""
  c = study.config
  extra = [max(c.grid.seed) + 1 + i for i in range(c.design.max_seeds - len(c.grid.seed))]
  by: dict[int, list] = {}
  for x in study.cells:
    if x.spec.seed == c.grid.seed[0]:
      by[x.spec.depth] = [grid.Cell(dataclasses.replace(x.spec, seed=s), x.length)
                          for s in list(c.grid.seed) + extra]
  return by


def first_study(study):
  """The study as plan.json holds it: the first round's cells (a grid: itself)."""
  if not is_adaptive(study):
    return study
  cand, ds = candidates(study), depths(study)
  used = {d: 0 for d in ds}
  cells = []
  for i in design.first_cells(ds, design_settings(study.config)):
    cells.append(cand[ds[i]][used[ds[i]]])
    used[ds[i]] += 1
  return dataclasses.replace(study, cells=tuple(cells))


def all_groups(study, workdir: str) -> list[plan.Group]:
  """plan.json's groups, then every round's (a grid: plan.json's alone)."""
  groups = plan_file.load_plan(first_study(study), workdir)
  if not is_adaptive(study):
    return groups
  by_key = {x.key: x for xs in candidates(study).values() for x in xs}
  for r in design_files.read_rounds(workdir):
    groups += [plan.Group(tuple(by_key[k] for k in g["cells"]), g["length"],
                          g["models_per_chunk"], g["remat"], g.get("layout", "pad"))
               for g in r["groups"]]
  return groups


def cost(study) -> list[float]:
  """The compute of one model per depth: its step's FLOPs times its steps (the
  planner's count; a price, not a measured time, so decisions never depend on timing)."""
  c = study.config
  seq = study.seq_len(c.grid.length[0])
  return [plan.step_flops(d, c.grid.width[0], c.grid.repeats[0], seq, c.train.batch_size)
          * c.train.steps for d in depths(study)]


def law_cells(study, rows) -> list[cell_law.Cell]:
  """The rows as the rule sees them: per depth, log2 n* (n* < 1 counts as 1) and whether
  it is a lower bound (n* at the longest length measured)."""
  c = study.config
  cap = math.log2(max(c.train.length_max, c.grid.length[0]))
  out = []
  for d in depths(study):
    here = sorted((r for r in rows if r["depth"] == d), key=lambda r: r["seed"])
    out.append(cell_law.Cell(
        x=float(d), y=tuple(math.log2(max(r["n_star"], 1)) for r in here),
        censored=tuple(bool(r["n_star"] >= (r.get("measured_length") or r["length"]))
                       for r in here), cap=cap))
  return out


def status(study, workdir: str) -> dict:
  """Where the design stands: rounds, the last fit, compute spent and budget (shares of
  the grid's), models chosen and whether it has stopped."""
  rounds = design_files.read_rounds(workdir)
  grid_cost = len(study.config.grid.seed) * sum(cost(study))
  chosen = len(first_study(study).cells) + sum(len(p) for p in
                                              (r["picks"] for r in rounds))
  last = rounds[-1] if rounds else None
  return dict(rounds=len(rounds), chosen=chosen, budget=study.config.design.budget,
              target=study.config.design.stop_ci, spent=last["spent"] if last else None,
              fit=last["fit"] if last else None, stop=last["stop"] if last else None,
              grid_cost=grid_cost)


def advance(study, workdir: str, rows, devs) -> tuple[str, int | None]:
  """At a barrier (every model of the rounds so far finished: `rows`), the next round
  decided and written once: ("more" or "stopped", the round this call wrote or None if
  another worker wrote it first or the design had stopped already). `devs`: the share
  that trains a group, whose memory the round's groups are fitted to."""
  rounds = design_files.read_rounds(workdir)
  if rounds and rounds[-1]["stop"]:
    return "stopped", None
  k, cells = len(rounds) + 1, law_cells(study, rows)
  _fault("decide", k)
  grid_cost = len(study.config.grid.seed) * sum(cost(study))
  price = [p / grid_cost for p in cost(study)]  # shares of the grid's compute
  spent = sum(price[i] * len(cl.y) for i, cl in enumerate(cells))
  d = design.decide(cells, price, 1.0, spent, design_settings(study.config))
  groups = _groups(study, cells, d["picks"], devs)
  picked = [x for g in groups for x in g.cells]
  record = dict(round=k, stop=d["stop"], spent=spent,
                fit={f: _plain(d["fit"].get(f)) for f in FIT_FIELDS},
                picks=[dict(p, depth=x.spec.depth, seed=x.spec.seed, key=x.key)
                       for p, x in zip(d["picks"], picked)],
                groups=plan.to_json(groups))
  if _fault("write", k):
    design_files.stage_round(workdir, k, record)  # a temporary file, as a kill mid-write
    os.kill(os.getpid(), signal.SIGKILL)
  wrote = design_files.write_round_once(workdir, k, record)  # a second writer's loses
  state = "stopped" if design_files.read_rounds(workdir)[k - 1]["stop"] else "more"
  return state, k if wrote else None


FAULT = "DEPTHSCALE_DESIGN_FAULT"  # tests: "decide:K" or "write:K" kills the worker there


def _fault(point: str, k: int) -> bool:
  """For the kill tests: SIGKILL at the barrier of round k ("decide"), or True to stage
  round k's file and then kill ("write"); False (and nothing) without FAULT set."""
  if os.environ.get(FAULT) != f"{point}:{k}":
    return False
  if point == "decide":
    os.kill(os.getpid(), signal.SIGKILL)
  return True


FIT_FIELDS = ("slope", "ci95", "rel_width", "b", "dof", "mu", "var", "info", "seeds",
              "fitted", "error", "slope_max")


def _plain(v):
  """JSON without Infinity or NaN (None instead)."""
  if isinstance(v, (list, tuple)):
    return [_plain(x) for x in v]
  if isinstance(v, float) and not math.isfinite(v):
    return None
  return v


def _groups(study, cells, picks, devs) -> list[plan.Group]:
  """The picks as cells (at each depth the next seed not yet trained) in one plan's
  groups, planned and fitted to the memory of `devs` as the first round was
  (plan_file.fit_groups): a round of more or deeper models than the first gets its own
  chunks, remat or split."""
  cand, ds = candidates(study), depths(study)
  used = {d: len(cl.y) for d, cl in zip(ds, cells)}
  new = []
  for p in picks:
    d = ds[p["cell"]]
    new.append(cand[d][used[d]])
    used[d] += 1
  if not new:
    return []
  return plan_file.fit_groups(dataclasses.replace(study, cells=tuple(new)), devs, list(devs),
                              log=lambda line: print(f"depthscale: design: {line}",
                                                     file=sys.stderr))
