"""Reports of a finished sweep: scaling-law fits (fits.py), report.md (report.py), plots (plots.py).

Works from files and plain result rows; never imports jax, core/ or model/.
"""
from depthscale.report.fits import (all_fits, depth_vs_log_nstar, fit_line, group_settings,
                                    nstar_vs_log_width, seed_rank, setting_key, settings)
from depthscale.report.report import build_report, load_workdir
