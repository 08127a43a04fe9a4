"""Live tracking of a sweep: each model's W&B curves as its group trains, its summary when
the group ends, and the summary run (table, fits, plots) refreshed as groups finish.

The tracker itself is io/trackers.py; the report is report/.
"""
from __future__ import annotations

import os
import sys
import threading

import numpy as np

from depthscale.io import results_csv
from depthscale.io import workdir as workdir_lib

SUMMARY = ("n_star", "k_star", "final_loss", "eval_loss", "seq_acc", "frozen")
CONF = ("task", "depth", "width", "heads", "seed", "lr", "length", "repeats", "steps", "group")


class Locked:
  """Calls to `obj` one thread at a time (the tracker, report files, matplotlib)."""

  def __init__(self, obj):
    self._obj, self._lock = obj, threading.Lock()

  def __getattr__(self, name):
    attr = getattr(self._obj, name)
    if not callable(attr):
      return attr
    def call(*a, **k):
      with self._lock:
        return attr(*a, **k)
    return call


class Guarded:
  """Tracker calls that never cost a result: the first that raises (W&B unreachable, not
  logged in, its service gone) is said in one line and turns tracking off for the rest of
  the process; the results and report are written either way. A W&B run's start waits at
  most trackers.INIT_TIMEOUT_S, so an unreachable server costs that once."""

  def __init__(self, tracker):
    self._tracker, self.failed = tracker, None

  def __getattr__(self, name):
    attr = getattr(self._tracker, name)
    if not callable(attr):
      return attr
    def call(*a, **k):
      if self.failed:
        return None
      try:
        return attr(*a, **k)
      except Exception as e:  # noqa: BLE001 -- the tracker's failure, never the results'
        self.failed = f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"
        print(f"depthscale: W&B tracking failed ({self.failed}); tracking is off for the "
              "rest of this run, results and report are written as usual (WANDB_MODE="
              "offline or disabled avoids it)", file=sys.stderr)
        return None
    return call


class LiveCurves:
  """Streams each model's curves to the tracker at every checkpoint of its group (every
  `log_every` of its own steps), so a long group shows progress before it ends. A model
  of a queue or a stopping rule is followed on its own steps: those it has trained so far
  (its `lr` curve is filled up to there), logged once each."""

  def __init__(self, tracker, g, log_every=10):
    self.tracker, self.g, self.log_every = tracker, g, log_every
    self.logged = [0] * len(g.cells)

  def __call__(self, step, curves):
    filled = np.isfinite(curves["lr"]) if "lr" in curves else None
    for m, cell in enumerate(self.g.cells):
      own = min(step, len(curves["loss"]))
      if filled is not None:  # a queued or stopped model: where its own curves end
        gap = np.nonzero(~filled[:, m])[0]
        own = min(own, int(gap[0]) if gap.size else own)
      steps = list(range(self.logged[m] + self.log_every, own + 1, self.log_every))
      if not steps:
        continue
      s = cell.spec
      conf = dict(depth=s.depth, width=s.width, heads=s.heads, seed=s.seed, lr=s.lr,
                  length=self.g.length, repeats=s.repeats, group=self.g.id)
      part = {"step": steps, **{k: v[[t - 1 for t in steps], m].tolist()
                                for k, v in curves.items()}}
      self.tracker.log_model(cell.key, conf, part, {})
      self.logged[m] = steps[-1]


def log_group(tracker, rows) -> None:
  """Each model's W&B run gets its final config and summary (n*, losses); its curves
  were streamed by LiveCurves."""
  for row in rows:
    tracker.log_model(row["model"], {k: row[k] for k in CONF if k in row}, {"step": []},
                      {k: row[k] for k in SUMMARY if k in row})


def refresh_summary(workdir: str, tracker) -> None:
  """results.csv, report.md, fits and plots of the groups finished so far, and the W&B
  summary run (its table and plots updated as groups finish)."""
  from depthscale.report import build_report  # matplotlib only when there is news
  rows = results_csv.merge_results(workdir)
  build_report(workdir)
  fits = workdir_lib.read_json(workdir, "fits.json") or {}
  plots = os.path.join(workdir, "plots")
  images = {p[:-4]: os.path.join(plots, p) for p in sorted(os.listdir(plots))
            if p.endswith(".png")} if os.path.isdir(plots) else {}
  tracker.log_summary(rows, images, fits.get("fits", {}))
