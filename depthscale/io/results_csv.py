"""A workdir's results.csv: every finished model's row, merged from groups/<id>.json of
the plan's groups (io/workdir.py reads those), sorted, written atomically; and read back
typed, a damaged file refused in one line. Needs no JAX."""
from __future__ import annotations

import csv
import io
import os

from depthscale.errors import UserError
from depthscale.io import atomic
from depthscale.io.workdir import read_groups

COLUMNS = ["task", "depth", "width", "heads", "seed", "lr", "length", "repeats", "n_star",
           "final_loss", "eval_loss", "seq_acc", "steps", "frozen", "group", "model",
           "k_star", "level_acc", "compile_s", "train_s", "save_s", "memory_bytes", "probe_step_s",
           "devices", "models_in_program", "trained_steps", "stop", "started_at",
           "trained_length", "measured_length", "positions_paid", "positions_own",
           "positions_full"]  # trained_steps..started_at: stop/slots; the rest: lengths


def merge_results(workdir: str) -> list[dict]:
  """The rows of the plan's finished groups, sorted, written to results.csv; returns them."""
  rows = [r for g in read_groups(workdir)[0].values() for r in g["rows"]]
  rows.sort(key=lambda r: (r["length"], r["depth"], r["repeats"], r["width"], r["lr"],
                           r["seed"]))
  write_results_csv(workdir, rows)
  return rows


def write_results_csv(workdir: str, rows: list[dict]) -> str:
  buf = io.StringIO()
  w = csv.DictWriter(buf, COLUMNS, extrasaction="ignore")
  w.writeheader()
  w.writerows(rows)
  path = os.path.join(workdir, "results.csv")
  atomic.write(path, buf.getvalue())
  return path


def parse_cell(v: str):
  """A results.csv cell back to bool, int, float, None or str."""
  if v in ("True", "False", ""):
    return {"True": True, "False": False, "": None}[v]
  for kind in (int, float):
    try:
      return kind(v)
    except ValueError:
      pass
  return v


def read_results_csv(workdir: str) -> list[dict] | None:
  """results.csv's rows, typed (None: no results.csv); a one-line UserError naming the
  file if it is damaged (a cut row, other columns, not text)."""
  path = os.path.join(workdir, "results.csv")
  if not os.path.exists(path):
    return None
  try:
    with open(path, newline="") as f:
      reader = csv.DictReader(f)
      rows = list(reader)
      header = reader.fieldnames or []
  except (UnicodeDecodeError, csv.Error, IsADirectoryError) as e:
    raise UserError(f"{path} is damaged ({e}); restore it, or move it aside (`depthscale "
                    "run` on the workdir writes it again from groups/)") from None
  cut = next((i for i, r in enumerate(rows) if None in r or None in r.values()), None)
  if "n_star" not in header or "depth" not in header or cut is not None:
    where = (f"line {cut + 2} does not have the header's {len(header)} fields"
             if cut is not None else "no depth / n_star column")
    raise UserError(f"{path} is damaged or not depthscale's ({where}); restore it, or move "
                    "it aside (`depthscale run` on the workdir writes it again from groups/)")
  return [{k: parse_cell(v) for k, v in r.items()} for r in rows]
