"""Nothing counted twice: a workdir's results are its plan's models, each once.

A stray group file (another study's, or one left from another grouping) is never merged
into results.csv or the report, which say so; seeds 2^32 apart, which JAX makes one
model, are refused. (plan.json removed or a plan field changed under results: refusal
rows in tests/test_integrity.py.)
"""
import json
import os
import shutil

import jax
import numpy as np
import pytest

from depthscale import cli, config
from depthscale.io import results_csv
from depthscale.io import workdir as workdir_lib
from depthscale.sweep import runner, study as study_lib


def _copy(reference_run, tmp_path):
  src, _ = reference_run
  dst = tmp_path / "w"
  shutil.copytree(src, dst)
  return dst


def test_a_stray_group_file_is_never_counted(reference_run, tmp_path, monkeypatch, capsys):
  w = _copy(reference_run, tmp_path)
  pristine = _copy(reference_run, tmp_path / "pristine")
  assert cli.main(["report", str(pristine)]) == 0
  groups = sorted((w / "groups").glob("*.json"))
  assert len(groups) == 2  # the reference: 2 groups of 3 models
  # a valid results file under an id the plan does not have: its rows are the same
  # models again (as a rerun under a changed grouping once wrote them)
  shutil.copy(groups[0], w / "groups" / "n16-3m-ffffffffff.json")
  capsys.readouterr()
  assert cli.main(["report", str(w)]) == 0
  err = capsys.readouterr().err
  assert "ignoring 1 group file(s) not in this workdir's plan.json (n16-3m-ffffffffff.json)" \
      in err, err
  for name in ("report.md", "fits.json", "claims.json"):
    assert (w / name).read_text() == (pristine / name).read_text(), name
  rows = [r for g in workdir_lib.read_groups(str(w))[0].values() for r in g["rows"]]
  assert len(rows) == 6 and len({r["model"] for r in rows}) == 6  # each model once

  def no_training(*_a, **_k):
    raise AssertionError("every group is done: nothing may train")
  monkeypatch.setattr(runner, "train_group", no_training)
  csv_before = (w / "results.csv").read_text()
  assert cli.main(["run", "--config", "experiments/quickstart.py:smoke", "--no-progress",
                   "--config.plan.max_models_per_group=3", "--config.train.steps=180",
                   "--workdir", str(w)]) == 0
  assert (w / "results.csv").read_text() == csv_before
  assert len(csv_before.strip().splitlines()) == 1 + 6  # header + 6 models, not 9


def test_seeds_2_32_apart_are_one_model_so_they_are_refused(capsys):
  # why: JAX keeps a seed's low 32 bits, so both seeds give one key, one model
  a, b = (np.asarray(jax.random.key_data(jax.random.key(s))) for s in (5, 5 + 2**32))
  assert (a == b).all()
  assert cli.main(["plan", "--config", "experiments/quickstart.py:smoke", "--no-probe",
                   f"--config.grid.seed=[5, {5 + 2**32}]"]) == 2
  err = capsys.readouterr().err.strip()
  assert "grid.seed" in err and "seed 5" in err and len(err.splitlines()) == 1
  c = config.load("experiments/quickstart.py:smoke", [f"grid.seed=[0, {2**32 - 1}]"])
  study_lib.resolve(c)  # the largest seed that is its own model is accepted


def test_a_group_file_with_the_plan_id_but_other_models_is_refused(tmp_path, reference_run):
  w = _copy(reference_run, tmp_path)
  path = sorted((w / "groups").glob("*.json"))[0]
  data = json.loads(path.read_text())
  data["rows"] = data["rows"] + data["rows"][:1]  # one model twice
  path.write_text(json.dumps(data))
  with pytest.raises(Exception, match="holds other models than its group"):
    results_csv.merge_results(str(w))
  assert os.path.exists(path)  # reported, left as it is


@pytest.mark.parametrize("damage", ["cut", "missing", "garbled"])
def test_report_rebuilds_a_results_csv_that_lost_rows(reference_run, tmp_path, capsys, damage):
  """A results.csv cut in half (or gone, or garbled) under finished groups: `report` writes
  it again from the group files, byte for byte the run's, and says so in one line."""
  w = _copy(reference_run, tmp_path)
  whole = (w / "results.csv").read_text()
  lines = whole.splitlines(keepends=True)
  assert len(lines) == 1 + 6
  if damage == "cut":
    (w / "results.csv").write_text("".join(lines[:4]))  # header + 3 of the 6 models
  elif damage == "missing":
    (w / "results.csv").unlink()
  else:
    (w / "results.csv").write_text(whole[: len(whole) // 2])  # a row cut mid-line
  capsys.readouterr()
  assert cli.main(["report", str(w)]) == 0
  err = capsys.readouterr().err.strip().splitlines()
  said = {"cut": "it held 3 of 6 models", "missing": "it was missing",
          "garbled": "it was damaged"}[damage]
  assert err == [f"depthscale: results.csv rebuilt from 2 group files: {said}"], err
  assert (w / "results.csv").read_text() == whole
  capsys.readouterr()
  assert cli.main(["report", str(w)]) == 0  # now whole: nothing rebuilt, nothing said
  assert capsys.readouterr().err == ""


@pytest.mark.parametrize("where", ["a space and ünïcödé", "a symlink"])
def test_a_workdir_path_with_spaces_unicode_or_a_symlink_is_the_same_workdir(
    reference_run, tmp_path, capsys, monkeypatch, where):
  """The reference run copied under a path with spaces and non-ASCII letters, or reached
  through a symlink: `status`, `report` and a rerun of `run` see the same finished
  workdir (nothing trained again, results.csv and report.md as the original's), and a
  rerun through the link's target sees the same study."""
  from conftest import SPLIT_SMOKE
  src, _ = reference_run
  real = tmp_path / "dir with space" / "ünïcödé w"
  shutil.copytree(src, real)
  path = real
  if where == "a symlink":
    path = tmp_path / "link"
    os.symlink(real, path)
  def no_training(*_a, **_k):
    raise AssertionError("every group is done: nothing may train")
  monkeypatch.setattr(runner, "train_group", no_training)
  capsys.readouterr()
  assert cli.main(["status", str(path)]) == 0
  out = capsys.readouterr().out
  assert "2 done" in out or "done: 2" in out, out
  assert cli.main(["report", str(path)]) == 0
  assert (real / "report.md").read_text() == (src / "report.md").read_text()
  for w in (path, real):
    assert cli.main(["run", *SPLIT_SMOKE, "--workdir", str(w)]) == 0
    assert (real / "results.csv").read_text() == (src / "results.csv").read_text()
