"""Which models an adaptive study trains next: a pure rule on the fitted law.

The slope b's variance is Var(b) = sum_c a_c^2 sigma_c^2 / I_c (cell_law.py: every model
a point, I_c the information a cell's seeds carry). One more seed at c is expected to
bring e_c (1 if it will be exact, less where it is likely censored); the rule scores it by
the variance it removes, Var(b) - Var(b | I_c + e_c), per unit of its compute, picks the
best, adds e_c and scores again (V-optimal per unit cost, as Li et al. 2026 pick runs for
a fitted law): on a straight line it moves seeds to the ends, the more so where they are
cheap or noisy. A cell with one seed enters the fit with its second (its noise is not
measured before), and is scored as that. A share of each round (`explore`) goes to an
unmeasured cell (the farthest from those measured) while one has fewer than two seeds,
else to the cell farthest from the line if it departs by more than FAR of its own
standard errors (a law that bends shows it; a straight one loses no picks to it). Ties go
to the earlier cell. Each cell's noise is scored at the upper 75% bound of its estimate
(sigma^2 k / chi2_0.25,k, k its seeds less one, PRIOR_DOF where borrowed): two seeds that
agree by chance are not taken for a quiet cell, whose seeds then go elsewhere (on the
replay's pool, depth 5's sd is 1.3 against depth 1's 0.14, and the worst replays had 3
seeds there at half the compute); cells with as many seeds are scaled alike. And a cell's
scored sd is at least REL_FLOOR of its mean log2 n*: two seeds that agree exactly sit at
the variance floor, and where both ends did (depth 5's two first seeds from its lower
mode), the cheap end took the next round's seeds. Pure numpy.
"""
from __future__ import annotations

import math

import numpy as np

from depthscale.report import cell_law

FAR = 2.0  # standard errors from the line at which a cell is worth exploring
NOISE_Q = 0.25  # a cell's noise is scored at its upper (1 - NOISE_Q) confidence bound
REL_FLOOR = 0.12  # and its sd at least this share of its mean log2 n* (BUILD_NOTES)


def chi2_quantile(q: float, k: float) -> float:
  """The q quantile of chi-squared with k degrees of freedom (Wilson-Hilferty: within 5%
  of the exact at q = NOISE_Q from k = 1, poorer far in the tails at k = 1)."""
  z = cell_law.normal_quantile(q)
  return k * max(1 - 2 / (9 * k) + z * math.sqrt(2 / (9 * k)), 1e-3) ** 3


def scored_noise(fit: dict) -> dict:
  """`fit` with each cell's sigma^2 at its upper (1 - NOISE_Q) bound and its sigma at
  least REL_FLOOR of the cell's mean log2 n* (its neighbours' where unmeasured), for
  scoring only."""
  k = [n - 1.0 if n >= 2 else cell_law.PRIOR_DOF for n in fit["seeds"]]
  floor = [(REL_FLOOR * _mu(fit, c)) ** 2 for c in range(len(fit["var"]))]
  return dict(fit, var=[max(v * kk / chi2_quantile(NOISE_Q, kk), f)
                        for v, kk, f in zip(fit["var"], k, floor)])


def shrink(fit: dict, caps, cost) -> np.ndarray:
  """Per cell: the expected shrink of the slope b's variance per unit compute of one
  more seed there (a cell with one seed enters the fit with its second; one with none
  changes nothing until explored), each cell's noise in Var(b) at its upper bound
  (scored_noise); its chance of censoring from the estimate itself."""
  sigma = np.sqrt(np.asarray(fit["var"], float))
  x, var, info = fit["x"], np.asarray(scored_noise(fit)["var"]), np.asarray(fit["info"], float)
  fitted = np.asarray(fit.get("fitted", np.asarray(fit["seeds"]) >= 2), bool)
  now = cell_law.slope_var(x, var, info, fitted)
  out = np.zeros(len(x))
  for c in range(len(x)):
    if fit["seeds"][c] == 0:
      continue
    more, inside = info.copy(), fitted.copy()
    more[c] += cell_law.expected_info(_mu(fit, c), float(sigma[c]), caps[c])
    inside[c] = True
    after = cell_law.slope_var(x, var, more, inside)
    out[c] = (now - after if math.isfinite(now) else 1e6 / (1 + after)) / cost[c]
  return out


def _mu(fit: dict, c: int) -> float:
  """Cell c's mean, or where unmeasured its nearest measured neighbours'."""
  mu = fit["mu"]
  if math.isfinite(mu[c]):
    return mu[c]
  near = sorted((abs(i - c), i) for i, m in enumerate(mu) if math.isfinite(m))
  return float(np.mean([mu[i] for d, i in near if d == near[0][0]])) if near else 0.0


def far_from_line(fit: dict) -> np.ndarray:
  """Per cell: how far its mean lies from the fitted line, in its own standard errors
  (0 where it has no mean or the fit has no line)."""
  if "error" in fit:
    return np.zeros(len(fit["x"]))
  x, mu = np.asarray(fit["x"]), np.asarray(fit["mu"])
  a = np.nanmean(mu) - fit["b"] * np.nanmean(np.where(np.isfinite(mu), x, np.nan))
  se = np.sqrt(np.asarray(fit["var"]) / np.maximum(fit["info"], 1e-9))
  z = np.abs(mu - (a + fit["b"] * x)) / se
  return np.where(np.isfinite(z), z, 0.0)


def pick(fit: dict, caps, cost, seeds, *, size: int, max_seeds: int,
         explore: float) -> list[dict]:
  """`size` picks: [{"cell", "score", "why"}], a cell picked once per new seed there.
  `seeds`: models per cell so far; no cell goes past `max_seeds`."""
  fit = dict(fit, info=list(fit["info"]), mu=list(fit["mu"]), seeds=list(fit["seeds"]))
  fit.setdefault("fitted", [n >= 2 for n in fit["seeds"]])
  seeds = list(seeds)
  n_explore = int(round(explore * size))
  far = far_from_line(fit)
  picks: list[dict] = []
  for k in range(size):
    open_c = [c for c in range(len(seeds)) if seeds[c] < max_seeds]
    if not open_c:
      break
    pick_c = _explore(open_c, seeds, far) if k >= size - n_explore else None
    if pick_c is None:
      s = shrink(fit, caps, cost)
      c = max(open_c, key=lambda i: (s[i], -i))
      why, score = "variance", float(s[c])
      if score <= 0:  # no one seed helps alone (it shifts the weights): the Neyman share
        c, why, score = _neyman(fit, cost, open_c)
    else:
      c, why, score = pick_c
    picks.append({"cell": int(c), "score": score, "why": why})
    _add_expected(fit, c, caps[c])
    seeds[c] += 1
    far[c] = 0.0
  return picks


def _neyman(fit: dict, cost, open_c):
  """The fitted cell furthest below its Neyman share of the models (|a_c| sigma_c /
  sqrt(cost_c), the allocation that minimises Var(b) at a given compute for fixed
  weights): where a single seed would not shrink Var(b) alone (on balanced ends a seed at
  one end moves the weights toward a noisy middle; the pair would shrink it)."""
  fitted = np.asarray(fit["fitted"], bool)
  info, var = np.asarray(fit["info"], float), np.asarray(scored_noise(fit)["var"], float)
  a = np.zeros(len(info))
  a[fitted] = cell_law.weights(np.asarray(fit["x"], float)[fitted], info[fitted])
  share = np.abs(a) * np.sqrt(var) / np.sqrt(np.asarray(cost, float))
  cand = [c for c in open_c if fitted[c] and share[c] > 0]
  if not cand:
    return min(open_c), "variance", 0.0
  c = max(cand, key=lambda i: (share[i] / info[i], -i))
  return c, "neyman share", float(share[c] / info[c])


def _explore(open_c, seeds, far):
  """An exploring pick: while a cell has fewer than two seeds, an unmeasured one before a
  second seed anywhere, the farthest from the measured cells first (the middle, after the
  ends: where a bend shows most; ties to the shallower, cheaper one); else the cell
  farthest from the line if it departs by more than FAR standard errors; None (a variance
  pick instead) when every cell has two seeds and sits on the line."""
  few = [c for c in open_c if seeds[c] < 2]
  if few:
    seen = [i for i in range(len(seeds)) if seeds[i] >= 1]
    c = max(few, key=lambda i: (-seeds[i], min([abs(i - j) for j in seen] or [0]), -i))
    return c, "few seeds", float(seeds[c])
  c = max(open_c, key=lambda i: (far[i], -i))
  return (c, "far from line", float(far[c])) if far[c] > FAR else None


def _add_expected(fit: dict, c: int, cap: float) -> None:
  """After a pick at c: its expected information added (an unmeasured cell takes its
  neighbours' mean, so a second pick there is scored as a second seed)."""
  fit["mu"][c] = mu = _mu(fit, c)
  fit["info"][c] += cell_law.expected_info(mu, math.sqrt(fit["var"][c]), cap)
  fit["seeds"][c] += 1
  if "fitted" in fit and fit["seeds"][c] >= 2:
    fit["fitted"] = [f or i == c for i, f in enumerate(fit["fitted"])]
