"""Scaling-law fits of n* against depth and width: least squares, r^2, bootstrap 95% CIs.

Works on plain result rows (dicts); never imports jax, core/ or model/. A setting is
every row field except the seed and the outcomes (OUTCOMES); its seeds are replicates.
"""
from __future__ import annotations

import math

import numpy as np

OUTCOMES = frozenset({"seed", "n_star", "final_loss", "eval_loss", "seq_acc", "frozen",
                      "train_s", "compile_s", "group", "model", "token_acc",
                      "k_star", "level_acc", "save_s", "memory_bytes", "probe_step_s",
                      "devices", "models_in_program", "trained_steps", "stop",
                      "started_at", "trained_length", "positions_paid", "positions_own",
                      "positions_full"})
REDUCERS = {"best": np.max, "median": np.median}


def model_steps(rows) -> tuple[int, int]:
  """(trained, budget) model-steps of `rows` (trained_steps where a stopping rule or a
  queue recorded it, else steps: the whole budget)."""
  own = lambda r: r.get("trained_steps") if r.get("trained_steps") not in (None, "") else (
      r.get("steps") or 0)
  return sum(int(own(r)) for r in rows), sum(int(r.get("steps") or 0) for r in rows)


def measured(rows) -> list:
  """The rows with outcomes: all but the models that never trained (halved before their
  first step, train.stop=halving: their n* and losses are empty)."""
  return [r for r in rows if r.get("n_star") is not None]
NAMES = {"depth": "depth_vs_log2_nstar", "width": "nstar_vs_log2_width",
         "repeats": "repeats_vs_log2_nstar"}
LAWS = {"depth": "depth = slope * log2(n_star) + intercept",
        "width": "n_star = slope * log2(width) + intercept",
        "repeats": "repeats = slope * log2(n_star) + intercept"}
LOG_AXES = ("depth", "repeats")  # fitted against log2 n* (the others: n* against log2 axis)


def is_outcome(field: str) -> bool:
  """A measured field (OUTCOMES, or a task's own held-out measure eval_<name>)."""
  return field in OUTCOMES or field.startswith("eval_")


def setting_fields(rows) -> list[str]:
  """The fields of `rows` that name a setting (all but the seed and the outcomes)."""
  return sorted({k for r in rows for k in r if not is_outcome(k)})


def _opt(v) -> float | None:
  """A float for JSON, or None where undefined (NaN never reaches a file)."""
  v = float(v)
  return v if math.isfinite(v) else None


def _fit_arrays(x_BxS, y_BxS):
  """Least squares along the last axis: slope, intercept, r2 (NaN where undefined), ok."""
  x_BxS, y_BxS = np.asarray(x_BxS, float), np.asarray(y_BxS, float)
  ok_B = np.ptp(x_BxS, axis=-1) > 0
  dx_BxS = x_BxS - x_BxS.mean(-1, keepdims=True)
  dy_BxS = y_BxS - y_BxS.mean(-1, keepdims=True)
  sxx_B, syy_B = (dx_BxS**2).sum(-1), (dy_BxS**2).sum(-1)
  sxy_B = (dx_BxS * dy_BxS).sum(-1)
  slope_B = np.where(ok_B, sxy_B / np.where(ok_B, sxx_B, 1.0), np.nan)
  intercept_B = y_BxS.mean(-1) - slope_B * x_BxS.mean(-1)
  has_r2 = ok_B & (np.ptp(y_BxS, axis=-1) > 0)
  r2_B = np.where(has_r2, sxy_B**2 / np.where(has_r2, sxx_B * syy_B, 1.0), np.nan)
  return slope_B, intercept_B, np.clip(r2_B, 0.0, 1.0), ok_B


def fit_line(x, y) -> dict:
  """Least-squares y = slope * x + intercept with r^2; `error` if x has < 2 values."""
  x, y = np.asarray(x, float).ravel(), np.asarray(y, float).ravel()
  if x.shape != y.shape:
    raise ValueError(f"x and y differ in length: {x.size} vs {y.size}")
  distinct = np.unique(x).size
  if distinct < 2:
    return {"error": f"need at least 2 distinct x values to fit a line, got {distinct} "
                     f"(from {x.size} points)", "n": int(x.size)}
  slope, intercept, r2, _ = _fit_arrays(x[None], y[None])
  return {"slope": float(slope[0]), "intercept": float(intercept[0]), "r2": _opt(r2[0]),
          "n": int(x.size)}


def _order(key):
  """Sort key for settings: numbers by value, anything else by text."""
  return tuple((k, 0, float(v), "") if isinstance(v, (int, float)) else (k, 1, 0.0, str(v))
               for k, v in key)


def setting_key(row: dict) -> tuple:
  """What identifies a row's setting: every field but the seed and the outcomes."""
  return tuple(sorted((k, v) for k, v in row.items() if not is_outcome(k)))


def seed_rank(row: dict) -> tuple:
  """Orders a setting's seeds as the paper picks them: largest n*, then lowest eval loss."""
  return (row["n_star"], -(row.get("eval_loss") or 0.0))


def group_settings(rows) -> list[tuple[dict, list[dict]]]:
  """(setting fields, its rows sorted by seed) per setting, in a fixed order."""
  groups: dict[tuple, list[dict]] = {}
  for row in rows:
    groups.setdefault(setting_key(row), []).append(row)
  return [(dict(k), sorted(g, key=lambda r: r.get("seed", 0)))
          for k, g in sorted(groups.items(), key=lambda kv: _order(kv[0]))]


def settings(rows) -> list[dict]:
  """One plain dict per setting: fields, seeds, per seed n* and `grew` (past the grid's
  length), best and median n*."""
  out = []
  for fields, group in group_settings(rows):
    ns = [int(r["n_star"]) for r in group]
    out.append({**fields, "seeds": [r.get("seed") for r in group], "n_star": ns,
                "best": max(ns), "median": float(np.median(ns)),
                "frozen": sum(bool(r.get("frozen", False)) for r in group),
                "grew": [(r.get("trained_length") or 0) > (r.get("length") or 0) for r in group]})
  return out


def _xy(axis: str, setting: dict, n_star):
  """The fitted coordinates of a setting with (reduced) n*: arrays broadcast alike."""
  n_star = np.asarray(n_star, float)
  if axis in LOG_AXES:
    return np.log2(n_star), np.full_like(n_star, float(setting[axis]))
  return np.full_like(n_star, math.log2(setting["width"])), n_star


def is_censored(setting: dict, n_star):
  """n* at the full sequence length only says "at least this" (a lower bound); elementwise
  for an array of n*."""
  length = measured_to(setting)
  if not isinstance(length, (int, float)) or isinstance(length, bool):
    return np.zeros(np.shape(n_star), bool) if np.ndim(n_star) else False
  return np.asarray(n_star) >= length if np.ndim(n_star) else bool(n_star >= length)


def measured_to(setting: dict):
  """The longest length n* was measured to: the grid's length, or with growth
  (train.length_max) the held-out set's (`measured_length`)."""
  return setting.get("measured_length") or setting.get("length")


def censored_note(axis: str, reduce: str, points: list[dict]) -> str:
  vals = ", ".join(f"{p[axis]} (n* {p['n_star']:g})" for p in points)
  top = sorted({p["length"] for p in points if p.get("length") is not None})
  return (f"{reduce} n* reached the longest length measured ({', '.join(map(str, top))}) at "
          f"{axis} {vals}: solved up to that length, a lower bound, left out of the fit; a "
          "longer length (train.length_max) is needed to measure it")


def _interval(v_B) -> list[float] | None:
  v_B = v_B[np.isfinite(v_B)]
  return [float(np.percentile(v_B, 2.5)), float(np.percentile(v_B, 97.5))] if v_B.size else None


def _axis_fit(rows, axis: str, reduce: str, B: int, seed: int) -> dict:
  if reduce not in REDUCERS:
    raise ValueError(f"reduce must be one of {sorted(REDUCERS)}, got {reduce!r}")
  rows = list(rows)
  kept = [r for r in rows if axis not in LOG_AXES or r["n_star"] >= 1]
  every = group_settings(kept)
  every_ns = [np.array([r["n_star"] for r in g], float) for _, g in every]
  every_red = [float(REDUCERS[reduce](ns)) for ns in every_ns]
  # n* = the full length says "at least this": such settings stay in `points` (flagged)
  # but are left out of the fit, and a note says so.
  cut = [is_censored(s, v) for (s, _), v in zip(every, every_red)]
  groups = [g for g, c in zip(every, cut) if not c]
  ns_S = [ns for ns, c in zip(every_ns, cut) if not c]
  red_S = [v for v, c in zip(every_red, cut) if not c]
  xy = [_xy(axis, s, v) for (s, _), v in zip(groups, red_S)]
  x_S, y_S = np.array([float(x) for x, _ in xy]), np.array([float(y) for _, y in xy])
  out = {"law": LAWS[axis], "reduce": reduce, "dropped": len(rows) - len(kept)}
  out.update(fit_line(x_S, y_S))
  censored = [{axis: s.get(axis), "n_star": v, "seeds": len(ns), "length": measured_to(s)}
              for (s, _), v, ns, c in zip(every, every_red, every_ns, cut) if c]
  if censored:
    out["censored"] = censored
    out["note"] = censored_note(axis, reduce, censored)
  if "error" in out and axis in LOG_AXES and kept and len(set(red_S)) == 1 and len(groups) > 1:
    out["error"] = (f"{reduce} n* is {red_S[0]:g} at every uncensored {axis}: log2 n* does not "
                    f"vary, so there is no law of {axis} in it")
  elif "error" in out and censored:
    out["error"] = (f"{len(groups)} {axis}(s) below the full length, fewer than the 2 a "
                    "fit needs: train at a longer length")
  elif "error" in out and axis in LOG_AXES:  # say why in the study's terms
    out["error"] = (f"no model reached n* >= 1 ({len(rows)} models)" if not kept else
                    f"{reduce} n* is {', '.join(f'{v:g}' for v in sorted(set(red_S)))} at "
                    f"every {axis}: log2 n* does not "
                    f"vary, so there is no law of {axis} in it")
  xy_all = [_xy(axis, s, v) for (s, _), v in zip(every, every_red)]
  out["points"] = [dict({axis: s.get(axis), "n_star": v, "seeds": len(ns), "x": float(x),
                         "y": float(y)}, **({"censored": True} if c else {}))
                   for (s, _), v, ns, (x, y), c in zip(every, every_red, every_ns, xy_all, cut)]
  if "error" in out:
    return out
  rng = np.random.default_rng(seed)
  if max(ns.size for ns in ns_S) >= 2:
    over = "seeds"
    red_BxS = np.stack([REDUCERS[reduce](ns[rng.integers(0, ns.size, (B, ns.size))], axis=1)
                        for ns in ns_S], axis=1)
    pairs = [_xy(axis, s, red_BxS[:, i]) for i, (s, _) in enumerate(groups)]
    x_BxS = np.stack([x for x, _ in pairs], axis=1)
    y_BxS = np.stack([y for _, y in pairs], axis=1)
    # a draw whose reduced n* reaches the full length (a median of resampled seeds can) is
    # as censored as a point: such draws are not counted in the interval
    capped_B = np.any([is_censored(s, red_BxS[:, i]) for i, (s, _) in enumerate(groups)],
                      axis=0)
  else:
    over = "points"
    idx_BxS = rng.integers(0, x_S.size, (B, x_S.size))
    x_BxS, y_BxS = x_S[idx_BxS], y_S[idx_BxS]
    capped_B = np.zeros(B, bool)
  slope_B, intercept_B, r2_B, ok_B = _fit_arrays(x_BxS, y_BxS)
  ok_B = ok_B & ~capped_B
  out.update(bootstrap_over=over, B=int(B), B_valid=int(ok_B.sum()),
             ci95={"slope": _interval(slope_B[ok_B]),
                   "intercept": _interval(intercept_B[ok_B]), "r2": _interval(r2_B[ok_B])})
  return out


def depth_vs_log_nstar(rows, reduce: str = "best", *, B: int = 1000, seed: int = 0) -> dict:
  """The paper's depth law d = a log2(n*) + b, one point per setting (n* reduced over
  seeds by `reduce`); rows with n* < 1 are dropped and counted in `dropped`."""
  return _axis_fit(rows, "depth", reduce, B, seed)


def nstar_vs_log_width(rows, reduce: str = "best", *, B: int = 1000, seed: int = 0) -> dict:
  """The paper's width law n* = a log2(w) + b, one point per setting."""
  return _axis_fit(rows, "width", reduce, B, seed)


def _slices(rows, axis: str) -> list[tuple[dict, list[dict], str | None]]:
  """Row subsets holding every other varying field fixed, each with >= 2 axis values.
  Fields that are a function of the axis (heads = width / 64, lr per depth) move with
  it and are not held fixed. Where no subset qualifies, all rows are fitted, with a note."""
  if len({r.get(axis) for r in rows}) < 2:
    return []
  fields = [k for k in setting_fields(rows) if k != axis]
  vary = [k for k in fields if len({r.get(k) for r in rows}) > 1
          and len({(r.get(axis), r.get(k)) for r in rows}) > len({r.get(axis) for r in rows})]
  subsets: dict[tuple, list[dict]] = {}
  for r in rows:
    subsets.setdefault(tuple(r.get(k) for k in vary), []).append(r)
  out = [(dict(zip(vary, key)), sub, None) for key, sub in subsets.items()
         if len({r.get(axis) for r in sub}) >= 2]
  if not out:
    note = (f"no subset with the other fields fixed has 2 {axis}s; fitted across "
            f"settings where {', '.join(vary)} also vary")
    out = [({}, list(rows), note)]
  return sorted(out, key=lambda s: _order(tuple(s[0].items())))


def all_fits(rows, *, B: int = 1000, seed: int = 0) -> dict:
  """Every fit the grid supports: {name: {"best": fit, "median": fit}}, per axis varied.
  Names carry [field=value,...] when several slices of the grid vary the same axis."""
  rows = list(rows)
  out = {}
  for axis, name in NAMES.items():
    slices = _slices(rows, axis)
    for where, sub, note in slices:
      key = name
      if len(slices) > 1:
        key += "[" + ",".join(f"{k}={v}" for k, v in where.items()) + "]"
      out[key] = {}
      for reduce in REDUCERS:
        fit = _axis_fit(sub, axis, reduce, B, seed)
        fit["where"] = where
        if note:
          fit["note"] = f"{note}; {fit['note']}" if fit.get("note") else note
        out[key][reduce] = fit
  return out


def size_star(sizes, accs, threshold: float) -> int:
  """The largest size solved: the largest s with accuracy >= threshold at s and at every
  smaller size of `sizes` (0 if the smallest already fails)."""
  best = 0
  for size, acc in sorted(zip(sizes, accs)):
    if acc is None or acc < threshold:
      break
    best = size
  return best


def size_rows(rows, threshold: float) -> list[dict]:
  """For tasks scaled by size (one decision per example, each model trained at one size =
  grid length): one row per setting-without-length and seed, with n_star = the largest
  size solved by that seed (size_star over its held-out accuracies, seq_acc)."""
  out: dict[tuple, list[dict]] = {}
  for r in rows:
    key = tuple(sorted((k, v) for k, v in r.items() if not is_outcome(k) and k != "length"))
    out.setdefault(key + (("seed", r.get("seed")),), []).append(r)
  return [{**dict(key), "n_star": size_star([r["length"] for r in g],
                                            [r.get("seq_acc") for r in g], threshold),
           "frozen": any(r.get("frozen") for r in g)}
          for key, g in out.items()]
