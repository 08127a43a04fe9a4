"""The slope an adaptive design aims at, with an interval that holds at few seeds.

The line log2 n* = b x + a (x the swept axis, the depth) is fitted by least squares with
every model a point, as the full grid's fit over its models: one more seed is one more
point, whose effect on the slope's variance can be computed before it trains (a median's
cannot, and a best seed's interval is one-sided). The slope reported is 1 / b, the
report's depth law (x per doubling of n*). Computed from cell means: b = sum_c a_c mu_c
with a_c = I_c (x_c - xbar) / sum_c I_c (x_c - xbar)^2 (xbar weighted by I), and
Var(b) = sum_c a_c^2 sigma_c^2 / I_c, each cell with its own noise (a law whose scatter
grows with depth is not given one sigma).

A censored model (n* at the longest length measured) is a lower bound: a cell's mean is
its maximum-likelihood value under a normal with the cell's sigma (EM), and the model
counts for the Fisher information it carries (I: lambda (lambda - alpha), below 1, where
an exact value counts 1). A cell's sigma is its seeds' scatter (a censored model at its
bound) shrunk toward its adjacent cells' (a cell with one seed borrows its nearest). The
interval is Student's t on b with Satterthwaite's degrees of freedom from the cells' own
(at most the fewest of a cell that carries a tenth of Var(b)), mapped through 1 / b;
while a fitted cell has one seed it is unbounded (its noise is a neighbour's guess, and an
interval narrow for that reason would not hold the truth): so such a cell is shown but
fitted only from its second seed, while two cells with two seeds exist. Where no slope can
be fitted because the deepest measured cell's models all reached their length, the fit
gives a one-sided bound instead (slope_bound). Pure numpy.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

PRIOR_DOF = 2.0     # the neighbours' variance counts as this many seeds' degrees of freedom
VAR_FLOOR = 1e-3    # (log2 units)^2: seeds that all agree still leave n*'s rounding
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571}


@dataclasses.dataclass(frozen=True)
class Cell:
  """One cell's models: x (the swept axis value), log2 n* per model, which are lower
  bounds (censored), and the log2 length a new model there would be censored at."""
  x: float
  y: tuple[float, ...] = ()
  censored: tuple[bool, ...] = ()
  cap: float = math.inf


def t975(dof: float) -> float:
  """Student's t 97.5% quantile: exact to 3 decimals for dof 1-5, Cornish-Fisher beyond."""
  if dof < 1:
    return math.inf
  if dof < 6:
    return T975[int(dof)]
  z, v = 1.959964, float(dof)
  return (z + (z**3 + z) / (4 * v) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v**2)
          + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * v**3))


def mills(alpha: float) -> float:
  """phi(alpha) / (1 - Phi(alpha)): the mean shift of a normal cut below at alpha."""
  if alpha > 25:
    return alpha + 1 / alpha
  tail = 0.5 * math.erfc(alpha / math.sqrt(2))
  return math.exp(-0.5 * alpha * alpha) / math.sqrt(2 * math.pi) / tail


def censored_info(mu: float, sigma: float, bound: float) -> float:
  """The information about mu of one model censored at `bound` (1 for an exact value)."""
  a = (bound - mu) / sigma
  lam = mills(a)
  return max(lam * (lam - a), 1e-6)


def expected_info(mu: float, sigma: float, cap: float) -> float:
  """The information a new model at a cell is expected to bring: exact below the cap,
  a lower bound above it (so a cell whose models all reach the length is worth little)."""
  if not math.isfinite(cap):
    return 1.0
  a = (cap - mu) / sigma
  p_cens = 0.5 * math.erfc(a / math.sqrt(2))
  return (1 - p_cens) + p_cens * censored_info(mu, sigma, cap)


def cell_mean(y, censored, sigma: float, steps: int = 200) -> float:
  """The mean of a normal(mu, sigma) from exact values and lower bounds (EM); NaN when
  every value is a lower bound (no finite maximum)."""
  y, cens = np.asarray(y, float), np.asarray(censored, bool)
  if cens.all():
    return math.nan
  mu = float(y.mean())
  for _ in range(steps):
    filled = [mu + sigma * mills((v - mu) / sigma) if c else v for v, c in zip(y, cens)]
    new = float(np.mean(filled))
    if abs(new - mu) < 1e-12:
      break
    mu = new
  return mu


def variances(cells: list[Cell]) -> tuple[np.ndarray, np.ndarray]:
  """Per cell (sigma^2, its own degrees of freedom). A cell's scatter counts its censored
  models at their bound (the true value lies beyond it, so the scatter is at least that:
  two seeds that agree beside one that solved every length are not a quiet cell). It is
  shrunk toward its adjacent cells' where they have one; a farther cell's noise is not
  this one's (a shallow end borrowing a deep end's scatter sends the seeds to the wrong
  end). A cell with no degrees of freedom borrows its nearest cells' on each side (all
  cells' pooled where none)."""
  own = [np.asarray(cl.y, float) if not all(cl.censored) else np.zeros(0) for cl in cells]
  dof = np.array([max(o.size - 1, 0) for o in own], float)
  s2 = np.array([o.var(ddof=1) if o.size > 1 else 0.0 for o in own])
  pooled = float((dof * s2).sum() / dof.sum()) if dof.sum() > 0 else math.nan
  out = np.empty(len(cells))
  for i in range(len(cells)):
    left = [j for j in range(i - 1, -1, -1) if dof[j] > 0][:1]
    right = [j for j in range(i + 1, len(cells)) if dof[j] > 0][:1]
    near = left + right
    if dof[i] == 0:
      out[i] = float(np.mean(s2[near])) if near else pooled
      continue
    adjacent = [j for j in near if abs(j - i) == 1]
    w = PRIOR_DOF if adjacent else 0.0
    prior = float(np.mean(s2[adjacent])) if adjacent else 0.0
    out[i] = (dof[i] * s2[i] + w * prior) / (dof[i] + w)
  return np.maximum(out, VAR_FLOOR), dof


def weights(x, info) -> np.ndarray:
  """The least-squares slope's weight on each cell mean, every model a point (a cell
  counts for its information; cells with none weigh nothing)."""
  x, n = np.asarray(x, float), np.asarray(info, float)
  if n.sum() <= 0:
    return np.zeros_like(x)
  dx = x - (n * x).sum() / n.sum()
  sxx = (n * dx**2).sum()
  return n * dx / sxx if sxx > 0 else np.zeros_like(x)


def slope_var(x, var, info, fitted) -> float:
  """Var(b) = sum_c a_c^2 sigma_c^2 / I_c over the fitted cells (inf while they span one
  x)."""
  x, var, info = (np.asarray(v, float) for v in (x, var, info))
  keep = (info > 0) & np.asarray(fitted, bool)
  if keep.sum() < 2 or np.ptp(x[keep]) == 0:
    return math.inf
  a = weights(x[keep], info[keep])
  return float((a**2 * var[keep] / info[keep]).sum())


def fit(cells: list[Cell]) -> dict:
  """The slope with its 95% interval. `cells`: the grid's cells in axis order, measured
  or not."""
  var, dof = variances(cells)
  mu, info = np.full(len(cells), np.nan), np.zeros(len(cells))
  for i, cl in enumerate(cells):
    if cl.y:
      sd = math.sqrt(var[i]) if math.isfinite(var[i]) else 1.0
      mu[i] = cell_mean(cl.y, cl.censored, sd)
      if math.isfinite(mu[i]):
        info[i] = sum(1.0 if not c else censored_info(mu[i], sd, v)
                      for v, c in zip(cl.y, cl.censored))
  x = np.array([cl.x for cl in cells], float)
  seeds = np.array([len(cl.y) for cl in cells])
  seen = np.isfinite(mu) & (info > 0)
  out = dict(x=x.tolist(), mu=mu.tolist(), var=var.tolist(), info=info.tolist(),
             seeds=seeds.tolist())
  if seen.sum() < 2 or np.ptp(x[seen]) == 0:
    out["error"] = f"{int(seen.sum())} cell(s) with a mean; a slope needs 2"
    return dict(out, **slope_bound(cells, var, dof, mu, info))
  thin = seen & (seeds < 2)
  if len(set(x[seen & ~thin])) >= 2:  # one-seed cells: shown, fitted at two
    seen, thin = seen & ~thin, np.zeros_like(thin)
  out["fitted"] = seen.tolist()
  a = weights(x[seen], info[seen])
  b = float(a @ mu[seen])
  vv = np.where(np.isfinite(var[seen]), var[seen], math.inf)
  v_c = a**2 * np.where(a != 0, vv, 0.0) / info[seen]
  var_b = float(v_c.sum())
  eff = dof[seen]
  satt = (var_b**2 / float((v_c**2 / np.maximum(eff, 1e-9)).sum())
          if 0 < var_b < math.inf else 0.0)
  # Satterthwaite errs short at one or two degrees of freedom a cell: the interval takes
  # no more than the poorest noise estimate among the cells that carry a tenth of Var(b)
  big = v_c >= 0.1 * var_b
  df = min(satt, float(dof.sum()), float(eff[big].min()) if big.any() else satt)
  half = t975(df) * math.sqrt(var_b) if var_b < math.inf and not thin.any() else math.inf
  lo_b, hi_b = b - half, b + half
  ci = [1 / hi_b, 1 / lo_b] if (lo_b > 0 or hi_b < 0) else [-math.inf, math.inf]
  slope = 1 / b if b != 0 else math.inf
  n = info[seen]
  icpt = float((n * mu[seen]).sum() / n.sum() - b * (n * x[seen]).sum() / n.sum())
  return dict(out, b=b, var_b=var_b, dof=df, ci95_b=[lo_b, hi_b], slope=slope,
              intercept=-icpt / b if b else math.nan, ci95=ci,
              rel_width=(ci[1] - ci[0]) / abs(slope) if math.isfinite(ci[1] - ci[0])
              else math.inf)


def normal_quantile(p: float) -> float:
  """Phi^-1(p) for 0 < p < 1 (bisection on erfc: exact to 1e-12, no scipy)."""
  lo, hi = -40.0, 40.0
  for _ in range(200):
    mid = (lo + hi) / 2
    if 0.5 * math.erfc(-mid / math.sqrt(2)) < p:
      lo = mid
    else:
      hi = mid
  return (lo + hi) / 2


def slope_bound(cells: list[Cell], var, dof, mu, info) -> dict:
  """Where no slope can be fitted because the deepest measured cell's models all reached
  their length (no mean, only a lower bound) and one shallower cell has a mean from at
  least two seeds: the one-sided 95% bound b >= b_lo, so slope <= 1 / b_lo. Its mean is
  at most its one-sided 97.5% t bound; the deep cell's mean, whose k models all lie beyond
  B (the smallest bound), is at least B - sigma Phi^-1(1 - 0.025^(1/k)) (the mean at which
  k models all reach B with probability 0.025); Bonferroni over the two. {} otherwise."""
  full = [i for i, cl in enumerate(cells) if cl.y and all(cl.censored)]
  means = [i for i in range(len(cells)) if math.isfinite(mu[i]) and info[i] > 0]
  if not full or len(means) != 1:
    return {}
  c, s = max(full, key=lambda i: cells[i].x), means[0]
  if cells[c].x <= cells[s].x or dof[s] < 1 or not math.isfinite(var[c]):
    return {}
  high_s = mu[s] + t975(dof[s]) * math.sqrt(var[s] / info[s])
  k = len(cells[c].y)
  low_c = min(cells[c].y) - math.sqrt(var[c]) * normal_quantile(1 - 0.025 ** (1 / k))
  b_lo = (low_c - high_s) / (cells[c].x - cells[s].x)
  if b_lo <= 0:
    return {}
  return dict(slope_max=1 / b_lo, ci95=[0.0, 1 / b_lo])
