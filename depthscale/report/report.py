"""A sweep's report: reads a workdir's files, writes fits.json, report.md and plots/*.png.

Works from results.csv, the plan's groups/<id>.json and config.json only (a results.csv that
disagrees with the group files is written again from them); never imports
jax, core/ or model/. The plots are drawn by plots.py; every write goes through io/atomic.py.
"""
from __future__ import annotations

import json
import os
import sys

from depthscale.errors import UserError
from depthscale.io import atomic, design_files, results_csv
from depthscale.io import workdir as workdir_lib
from depthscale.report import claims as claims_lib
from depthscale.report import fits, plots, sections

MODEL_COLS = ("task", "depth", "width", "heads", "lr", "length", "repeats", "seed", "n_star",
              "k_star", "final_loss", "eval_loss", "seq_acc", "steps", "frozen", "train_s")


def load_workdir(workdir: str) -> dict:
  """config, rows, groups (with id) and where the rows came from; groups/ preferred
  (typed, and in step with their curves), results.csv otherwise (io/workdir.py reads)."""
  workdir_lib.check_contents(workdir)  # damaged or foreign files: one line naming them
  config = workdir_lib.read_config(workdir)
  if config is None and workdir_lib.read_plan(workdir) is not None:  # claims, fits: its
    raise UserError(f"{workdir}/config.json is missing, but its plan.json and results are "
                    "there; restore config.json (the study's claims and fits come from "
                    "it), then report again")
  config = config or {}
  found, stray = workdir_lib.read_groups(workdir)  # the plan's groups only
  workdir_lib.say_ignored(stray)
  groups = [{**g, "id": gid} for gid, g in found.items()]
  csv_damaged = False
  try:
    csv_rows = results_csv.read_results_csv(workdir)
  except UserError:
    if not groups:
      raise
    csv_rows, csv_damaged = None, True  # the report is built from groups/ anyway
  if groups:
    rows, source = [r for g in groups for r in g["rows"]], "groups/*.json"
  elif csv_rows and workdir_lib.read_plan(workdir) is not None:
    raise UserError(f"{workdir}/results.csv holds {len(csv_rows)} rows, but no group of "
                    "plan.json has finished (status: 0 done), so they are not this "
                    "workdir's; move results.csv aside, or run the study")
  elif csv_rows is not None:  # results.csv copied without the plan: reported as such
    rows, source = csv_rows, "results.csv"
  else:
    raise FileNotFoundError(f"{workdir} has neither results.csv nor groups/*.json; "
                            "run the sweep (or point at its workdir) first")
  return dict(config=config, rows=rows, groups=groups, source=source,
              csv_count=None if csv_rows is None else len(csv_rows), csv_damaged=csv_damaged)


def mend_results_csv(workdir: str, data: dict) -> None:
  """results.csv written again from the group files when it disagrees with them (cut,
  damaged, missing rows or missing), with one line on stderr saying what it held; `data`
  (load_workdir's) then counts the new file. A results.csv with no plan is left alone."""
  groups, k = data["groups"], len(data["rows"])
  if not groups or (data["csv_count"] == k and not data["csv_damaged"]):
    return
  held = ("was damaged" if data["csv_damaged"] else "was missing" if data["csv_count"] is None
          else f"held {data['csv_count']} of {k} models")
  results_csv.merge_results(workdir)
  data["csv_count"], data["csv_damaged"] = k, False
  print(f"depthscale: results.csv rebuilt from {len(groups)} group files: it {held}",
        file=sys.stderr)


_fmt = sections.fmt


def _ci(fit: dict, name: str) -> str:
  lo_hi = (fit.get("ci95") or {}).get(name)
  return f"[{lo_hi[0]:.3f}, {lo_hi[1]:.3f}]" if lo_hi else "–"


_table = sections.table


def _sorted(values) -> list:
  num = lambda v: isinstance(v, (int, float))
  return sorted(values, key=lambda v: (not num(v), v if num(v) else 0, str(v)))


def _fit_section(all_fit: dict, paper: dict | None) -> list[str]:
  head = ["fit", "reduce", "slope", "slope 95% CI", "intercept", "intercept 95% CI", "r²",
          "r² 95% CI", "points", "bootstrap over", "dropped (n*<1)"]
  body, notes = [], []
  for key, pair in all_fit.items():
    for reduce, f in pair.items():
      if "error" in f:
        notes.append(f"- `{key}` ({reduce}): no fit: {f['error']}")
        continue
      body.append([f"`{key}`", reduce, f"{f['slope']:.3f}", _ci(f, "slope"),
                   f"{f['intercept']:.3f}", _ci(f, "intercept"), _fmt(f["r2"]), _ci(f, "r2"),
                   f["n"], f"{f['bootstrap_over']} (B={f['B']})", f["dropped"]])
    for note in sorted({f["note"] for f in pair.values() if f.get("note")}):
      notes.append(f"- `{key}`: {note}")
  if paper:
    body.append([f"paper ({paper.get('kind')})", "published", f"{paper['slope']:.3f}", "–",
                 f"{paper['intercept']:.3f}", "–", _fmt(paper.get("r2")), "–", "–", "–", "–"])
    name = fits.NAMES.get(paper.get("kind"), "?")
    mine = [(k, p["best"]) for k, p in all_fit.items()
            if k.startswith(name) and "error" not in p["best"]]
    for key, f in mine:
      lo, hi = (f.get("ci95") or {}).get("slope") or (None, None)
      inside = lo is not None and lo <= paper["slope"] <= hi
      notes.append(f"- paper slope {paper['slope']:g} ({paper.get('source', 'paper')}) is "
                   f"{'inside' if inside else 'outside'} the best-seed 95% interval of `{key}`")
    if not mine:
      notes.append(f"- paper fit ({paper.get('kind')}) given, but this sweep has no such fit")
    if paper.get("note"):  # e.g. where this study's encoding changes the law's constants
      notes.append(f"- {paper['note']}")
  if not body and not notes:
    return [f"No fit: the grid has one value of each of {', '.join(fits.NAMES)}."]
  if not body:
    return notes
  return [f"Laws: {'; '.join(fits.LAWS.values())}.", ""] + _table(head, body) + [""] + notes


def _levels_section(rows) -> list[str]:
  """Hardest level solved (k* for k-hop) per setting and seed, with accuracy per level."""
  if not any(isinstance(r.get("k_star"), int) for r in rows):
    return []
  set_cols = fits.setting_fields(rows)
  body = [[s.get(k) for k in set_cols] + [r.get("seed"), r.get("k_star"),
                                           str(r.get("level_acc") or "–")]
          for s, g in fits.group_settings(rows) for r in g]
  return (["", "## Hardest level solved (k* for k-hop)", "",
           "k* = largest k such that the held-out token accuracy is at least the threshold "
           "at every k' <= k (-1: not even k = 0).", ""]
          + _table(set_cols + ["seed", "k*", "accuracy at k = 0, 1, ..."], body))


def _what_was_run(data: dict, sets: list[dict], workdir: str) -> list[str]:
  rows, groups, config = data["rows"], data["groups"], data["config"]
  if groups:
    train_s = sum(max((r.get("train_s") or 0.0) for r in g["rows"]) for g in groups if g["rows"])
    how = "summed over groups; the models of a group train together"
  else:
    train_s = sum(r.get("train_s") or 0.0 for r in rows)
    how = "summed over models; models trained together share it, so this overcounts"
  tasks = ", ".join(sorted({str(r.get("task")) for r in rows}))
  md = [f"# {config.get('name', os.path.basename(os.path.abspath(workdir)))}", "",
        "## What was run", "", f"- task: {config.get('task', tasks)}",
        f"- models: {len(rows)} ({len(sets)} settings, {len(groups) or 'unknown'} groups), "
        f"rows from {data['source']}",
        f"- total train time: {train_s:.1f} s ({train_s / 3600:.2f} h), {how}"]
  trained, budget = fits.model_steps(rows)
  t = config.get("train", {})
  if budget and (t.get("stop", "none") != "none" or t.get("slots")):
    md.append(f"- model-steps: {trained} trained of a {budget} budget, {budget - trained} "
              f"({100 * (budget - trained) / budget:.0f}%) saved by train.stop="
              f"{t.get('stop', 'none')} (slots: {t.get('slots') or 'one per model'})")
  md += ["", "Grid:", ""]
  for k in fits.setting_fields(rows) + ["seed"]:
    md.append(f"- {k}: {', '.join(_fmt(v) for v in _sorted({r.get(k) for r in rows}))}")
  if data["csv_count"] is not None and data["csv_count"] != len(rows):
    md += ["", f"Warning: results.csv has {data['csv_count']} rows, groups/ {len(rows)}."]
  return md


def _companions(workdir: str, spec: dict) -> dict[str, list[dict]]:
  """Rows of each companion run (in workdir/<name>) that has results so far."""
  out = {}
  for name in spec:
    try:
      out[name] = load_workdir(os.path.join(workdir, name))["rows"]
    except FileNotFoundError:
      pass
  return out


def build_report(workdir: str) -> str:
  """Writes fits.json, claims.json, report.md and plots/*.png into `workdir`; returns
  report.md's path."""
  data = load_workdir(workdir)
  mend_results_csv(workdir, data)
  rows, groups, config = fits.measured(data["rows"]), data["groups"], data["config"]
  rep = config.get("report") or {}
  threshold = (config.get("eval") or {}).get("threshold", 0.95)
  by_size = rep.get("scaled_by") == "size"
  fit_rows = fits.size_rows(rows, threshold) if by_size else rows
  by_loss = rep.get("scaled_by") == "loss"
  all_fit = {} if by_loss else fits.all_fits(fit_rows)
  sets = fits.settings(fit_rows)
  others = _companions(workdir, rep.get("companions") or {})
  try:  # config.json is the user's to edit: a claim it cannot check is one line
    claims_lib.check_spec([dict(x) for x in rep.get("claims") or []],
                          dict(rep.get("companions") or {}))
  except (ValueError, TypeError) as e:
    raise UserError(f"{workdir}/config.json: {e}; fix its report section, or restore "
                    "it") from None
  checked = claims_lib.check(rep.get("claims") or [], rows, groups, all_fit, others, threshold,
                             claims_lib.unmeasured_depths(config, rows))
  atomic.write(os.path.join(workdir, "fits.json"),
               json.dumps({"fits": all_fit, "settings": sets}, indent=1))
  atomic.write(os.path.join(workdir, "claims.json"), json.dumps(checked, indent=1))
  plot_dir = os.path.join(workdir, "plots")
  os.makedirs(plot_dir, exist_ok=True)
  measure = ("largest size solved" if by_size
             else f"n* (largest length at >= {threshold:g} accuracy)")
  figs = {name: plots.scaling(axis, all_fit, sets, os.path.join(plot_dir, name), measure)
          for axis, name in (("depth", "nstar_vs_depth.png"), ("width", "nstar_vs_width.png"),
                             ("repeats", "nstar_vs_repeats.png"))}
  figs["accuracy_per_position.png"] = plots.positions(
      groups, rows, os.path.join(plot_dir, "accuracy_per_position.png"))
  figs["training_curves.png"], curve_notes = plots.curves(
      groups, os.path.join(plot_dir, "training_curves.png"))
  md = _what_was_run(data, sets, workdir) + [""] + sections.claims(checked)
  fit_note = (["Here n* is the largest size solved (see Accuracy per size): each model "
               "makes one decision per example, so leading positions do not apply.", ""]
              if by_size else [])
  if by_loss:
    md += ["## Fits", "", "None: this task is measured by its losses (below), not by a "
           "length solved.", ""]
  else:
    md += ["## Fits", ""] + fit_note + _fit_section(all_fit, config.get("paper_fit"))
  md += [""] + (sections.sizes(rows, threshold) if by_size else [])
  md += sections.losses(rows) + sections.lengths(rows) + sections.partials(groups)
  md += sections.level_errors(rows, rep.get("paper_table") or {})
  md += sections.companions(rows, others) + _levels_section(rows)
  md += sections.design_rounds(design_files.read_rounds(workdir))
  md += ["", "## Plots", ""]
  for fname, skipped in figs.items():
    title = fname[:-4].replace("_", " ")
    md += [f"_{title}: {skipped}_" if skipped else f"![{title}](plots/{fname})", ""]
  md += [f"- {n}" for n in curve_notes] + ["", "## Settings (n* over seeds)", ""]
  set_cols = fits.setting_fields(rows)
  md += _table(set_cols + ["seeds", "n* per seed", "best n*", "median n*", "frozen"],
               [[s.get(k) for k in set_cols] + [len(s["seeds"]), str(s["n_star"]), s["best"],
                                                s["median"], s["frozen"]]
                for s in (fits.settings(rows) if by_size else sets)])
  cols = [c for c in MODEL_COLS if any(c in r for r in rows)]
  cols += sorted({k for r in rows for k in r} - set(cols))
  ordered = [r for _, g in fits.group_settings(rows) for r in g]
  md += ["", "## Models", ""] + _table(cols, [[r.get(c) for c in cols] for r in ordered])
  path = os.path.join(workdir, "report.md")
  atomic.write(path, "\n".join(md) + "\n")
  return path
