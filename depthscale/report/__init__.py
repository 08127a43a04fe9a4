"""Reports of a finished sweep: scaling-law fits (fits.py), report.md (report.py), plots (plots.py).

Works from files and plain result rows; never imports jax, core/ or model/. The names
below load on first use (PEP 562), so a command that only fits or decides (status, plan,
run's design barrier) does not import matplotlib with the report.
"""
import importlib

_FROM = {"all_fits": "fits", "depth_vs_log_nstar": "fits", "fit_line": "fits",
         "group_settings": "fits", "nstar_vs_log_width": "fits", "seed_rank": "fits",
         "setting_key": "fits", "settings": "fits",
         "build_report": "report", "load_workdir": "report"}


def __getattr__(name):
  if name in _FROM:
    return getattr(importlib.import_module(f"depthscale.report.{_FROM[name]}"), name)
  raise AttributeError(f"module 'depthscale.report' has no attribute {name!r}")


__all__ = sorted(_FROM)
