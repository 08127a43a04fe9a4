"""Report sections for the measures a study's paper uses beyond n*: held-out loss,
partial losses over training, accuracy per size, per-k error, companion runs, claims.

Each takes plain rows / group files and returns markdown lines ([] when it does not
apply). Never imports jax.
"""
from __future__ import annotations

import statistics

from depthscale.report import claims as claims_lib
from depthscale.report import fits


def fmt(v) -> str:
  if v is None:
    return "–"
  if isinstance(v, bool):
    return "yes" if v else "no"
  return f"{v:.4g}" if isinstance(v, float) else str(v)


def table(head, body) -> list[str]:
  return (["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
          + ["| " + " | ".join(c if isinstance(c, str) else fmt(c) for c in r) + " |"
             for r in body])


def claims(checked: list[dict]) -> list[str]:
  if not checked:
    return []
  held = sum(c["holds"] is True for c in checked)
  open_ = sum(c["holds"] is None for c in checked)
  said = {True: "yes", False: "**no**", None: "undecided"}
  return (["## The paper's claims, checked on this run", "",
           f"{held} of {len(checked)} hold" + (f", {open_} undecided" if open_ else "")
           + " (also in claims.json).", ""]
          + table(["claim", "paper", "measured here", "holds"],
                  [[c["claim"], c["paper"], c["measured"], said[c["holds"]]]
                   for c in checked]) + [""])


def losses(rows) -> list[str]:
  """Held-out loss by setting: best and median over seeds, and each seed's."""
  cols = [k for k in fits.setting_fields(rows) if len({r.get(k) for r in rows}) > 1]
  body = []
  for s, g in fits.group_settings(rows):
    ls = [r["eval_loss"] for r in g if r.get("eval_loss") is not None]
    if ls:
      body.append([s.get(k) for k in cols] + [min(ls), statistics.median(ls),
                                               ", ".join(f"{v:.3g}" for v in ls)])
  if not body:
    return []
  return (["## Final held-out loss", ""]
          + table(cols + ["best", "median", "per seed"], body) + [""])


def lengths(rows) -> list[str]:
  """The sequence positions the models' steps computed against the full length's and
  their stages' (length buckets), and each model that grew past the grid's length
  (train.length_max) with the length it last trained at and its n*."""
  have = [r for r in rows if r.get("positions_full")]
  if not have:
    return []
  paid, own, full = (sum(int(r[k]) for r in have)
                     for k in ("positions_paid", "positions_own", "positions_full"))
  out = ["## Lengths trained", "",
         f"Sequence positions computed: {paid:,} of the {full:,} that every step at the full "
         f"length would have cost ({paid / full:.0%}); the models' own stages needed "
         f"{own:,} ({own / full:.0%}), so {(paid - own) / max(paid, 1):.0%} of the computed "
         "positions lay above a model's own stage (its step ran at a longer bucket: a "
         "longer model's in its group, or the shortest, core/lengths.MIN_BUCKET).", ""]
  grew = [r for r in have if (r.get("trained_length") or 0) > r["length"]]
  if any(r.get("measured_length") for r in have):
    top = max(r.get("measured_length") or 0 for r in have)
    out += [f"Growth to length {top}: {len(grew)} of {len(have)} models grew past the "
            f"grid's length; n* is measured on a held-out set at length {top}.", ""]
  if grew:
    out += table(["depth", "width", "lr", "seed", "grid length", "trained to", "n*"],
                 [[r["depth"], r.get("width"), r.get("lr"), r.get("seed"), r["length"],
                   r["trained_length"], r.get("n_star")]
                  for r in sorted(grew, key=lambda r: (r["depth"], r.get("seed", 0)))]) + [""]
  return out


def partials(groups, below: float = claims_lib.PARTIAL_SOLVED) -> list[str]:
  """The partial losses (x_1, x_2, ... of a chain) of every model: the first logged step
  each falls below `below`, their final values, and whether they fell in chain order."""
  models = claims_lib.partial_curves(groups)
  if not models:
    return []
  n = len(models[0][2])
  body = []
  for row, steps, curves in sorted(models, key=lambda m: (m[0]["depth"], m[0].get("seed", 0))):
    cross = claims_lib.crossings(steps, curves, below)
    final = [next((v for v in reversed(c) if v is not None), None) for c in curves]
    body.append([row["depth"], row.get("seed")] + [fmt(x) for x in cross]
                + [" ".join(fmt(v) for v in final),
                   claims_lib.in_chain_order(cross) if sum(x is not None for x in cross) >= 2
                   else "–"])
  return (["## Partial losses (per chain position) over training", "",
           f"Step at which the training loss of chain position x_i first falls below "
           f"{below:g} (–: never), the final partial losses, and whether the positions fell "
           "in chain order.", ""]
          + table(["depth", "seed"] + [f"x_{i + 1} < {below:g} at" for i in range(n)]
                  + ["final partial losses", "in order"], body) + [""])


def sizes(rows, threshold: float) -> list[str]:
  """Tasks scaled by size: held-out accuracy per (depth, size), best seed, and the
  largest size solved per depth (every size up to it at >= threshold)."""
  lengths = sorted({r["length"] for r in rows})
  depth_rows = {}
  for r in rows:
    key = (r["depth"], r.get("repeats", 1), r.get("width"))
    cell = depth_rows.setdefault(key, {})
    if r.get("seq_acc") is not None:
      cell[r["length"]] = max(cell.get(r["length"], 0.0), r["seq_acc"])
  body = []
  for (d, rep, w), cell in sorted(depth_rows.items()):
    star = fits.size_star(list(cell), list(cell.values()), threshold)
    body.append([d, rep, w] + [cell.get(n) for n in lengths] + [star])
  return (["## Accuracy per size", "",
           f"Held-out accuracy of the decision (best seed) at each size; largest size solved "
           f"= the largest size with accuracy >= {threshold:g} there and at every smaller "
           "size (0: none).", ""]
          + table(["depth", "repeats", "width"] + [f"size {n}" for n in lengths]
                  + ["largest size solved"], body) + [""])


def level_errors(rows, paper: dict) -> list[str]:
  """Per-level error (1 - token accuracy at k) by depth, best seed (largest k*), beside
  the paper's published errors (`paper`: {depth: text})."""
  have = [r for r in rows if r.get("level_acc")]
  if not have:
    return []
  best = {}
  for r in sorted(have, key=lambda r: (r.get("k_star", -1), -(r.get("eval_loss") or 0.0))):
    best[(r["depth"], r.get("width"))] = r
  levels = len(str(best[next(iter(best))]["level_acc"]).split())
  body = [[d, w] + [f"{1 - float(a):.3f}" for a in str(r["level_acc"]).split()]
          + [paper.get(str(d), "–")] for (d, w), r in sorted(best.items())]
  return (["## Error per k by depth (best seed) beside the paper", ""]
          + table(["depth", "width"] + [f"k={k}" for k in range(levels)] + ["paper"], body)
          + [""])


def companions(rows, others: dict[str, list[dict]], measure: str = "n_star") -> list[str]:
  """This study beside each companion run, by effective depth (depth x repeats)."""
  out = []
  eff = lambda rs: claims_lib.best_by([{**r, "effective_depth": r["depth"] * r.get("repeats", 1)}
                                       for r in rs], "effective_depth", measure)
  for name, theirs in others.items():
    mine, other = eff(rows), eff(theirs)
    body = [[d, mine.get(d), other.get(d)] for d in sorted(set(mine) | set(other))]
    out += ([f"## Beside the companion run `{name}`", "",
             f"Best {measure} over seeds by effective depth (depth x repeats); a looped "
             "model has the parameters of one block.", ""]
            + table(["effective depth", "this study", name], body) + [""])
  return out


def design_rounds(rounds: list[dict]) -> list[str]:
  """An adaptive design's decisions (design/round-<k>.json): per round the compute spent
  before it (a share of the grid's), the slope and interval it decided from, and the
  models it chose with their scores (or why it stopped)."""
  if not rounds:
    return []
  out = ["## Adaptive design", "", "Each decision was made at a round barrier from the "
         "results recorded then; scores are the expected shrink of the slope's variance per "
         "unit of compute (`variance`), or a pick kept for depths with few seeds or far from "
         "the line. The slope is the design's own fit (every model a point, censored models "
         "as lower bounds; BUILD_NOTES.md, Adaptive design).", ""]
  body = []
  for r in rounds:
    f = r["fit"]
    ci = f.get("ci95") or [None, None]
    slope = (f"{f['slope']:.3g} [{fmt(ci[0])}, {fmt(ci[1])}]" if f.get("slope") is not None
             else f"≤ {f['slope_max']:.3g} (one-sided)" if f.get("slope_max") is not None
             else "–")
    chose = (f"stop ({r['stop']})" if r["stop"] else
             "; ".join(f"depth {p['depth']} seed {p['seed']} ({p['why']} {p['score']:.3g})"
                       for p in r["picks"]))
    body.append([r["round"], f"{100 * r['spent']:.0f}%", slope, chose])
  return out + table(["decision", "compute spent", "slope [95% CI]", "chosen"], body) + [""]
