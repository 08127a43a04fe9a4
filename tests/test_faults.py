"""Faults during a run, each reported in one line with nothing lost: the disk fills while
a checkpoint is written; a results file is corrupt or from another version."""
import errno
import json
import os

import numpy as np
import pytest
from etils import epath

from depthscale import cli, config
from depthscale.errors import UserError
from depthscale.io import workdir as workdir_lib
from depthscale.io.checkpoint import GroupCheckpoints
from depthscale.sweep import study as study_lib


def test_disk_full_during_a_save_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
  tree = {"w": np.arange(6, dtype=np.float32), "step": np.zeros((), np.int32)}
  ck = GroupCheckpoints(str(tmp_path / "ck"))
  ck.save(10, tree)
  path_cls = type(epath.Path(str(tmp_path)))

  def full(*_a, **_k):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
  with monkeypatch.context() as m:  # orbax's metadata writes fail mid-save
    m.setattr(path_cls, "write_text", full)
    m.setattr(path_cls, "write_bytes", full)
    with pytest.raises(UserError, match="step-20 checkpoint.*step-10 checkpoint is kept"):
      ck.save(20, {"w": tree["w"] + 1, "step": np.full((), 20, np.int32)})
  again = GroupCheckpoints(str(tmp_path / "ck"))  # the rerun after space was freed
  step, got = again.restore_latest(tree)
  assert step == 10 and np.array_equal(got["w"], tree["w"])
  again.save(20, {"w": tree["w"] + 1, "step": np.full((), 20, np.int32)})  # resumes saving
  step, got = again.restore_latest(tree)
  assert step == 20 and np.array_equal(got["w"], tree["w"] + 1)


def test_other_save_errors_are_not_disguised(tmp_path, monkeypatch):
  ck = GroupCheckpoints(str(tmp_path / "ck"))
  path_cls = type(epath.Path(str(tmp_path)))

  def broken(*_a, **_k):
    raise OSError(errno.EIO, "I/O error")
  monkeypatch.setattr(path_cls, "write_text", broken)
  monkeypatch.setattr(path_cls, "write_bytes", broken)
  with pytest.raises(OSError) as e:
    ck.save(10, {"w": np.zeros(3, np.float32)})
  assert not isinstance(e.value, UserError)


@pytest.mark.parametrize("text,words", [
    ('{"rows": [{"n_star": 3', "is corrupt"),  # truncated mid-write by another tool
    ("", "is corrupt"),
    ('{"rows": [], "curves": {}, "per_position_acc": []}', "another version"),
    ('{"rows": [], "format": 99}', "another version")])
def test_report_refuses_a_bad_results_file_and_leaves_it(text, words, tmp_path, capsys):
  study_lib.claim_workdir(study_lib.resolve(config.load("experiments/quickstart.py:smoke")), str(tmp_path))
  path = tmp_path / "groups" / "n16-6m-0123456789.json"
  path.parent.mkdir()
  path.write_text(text)
  assert cli.main(["report", str(tmp_path)]) == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and words in err[0] and str(path) in err[0]
  assert path.read_text() == text  # reported, never rebuilt or overwritten
  assert not (tmp_path / "results.csv").exists()


def test_results_files_carry_their_format(tmp_path):
  rows = [{"n_star": 2}]
  workdir_lib.write_group(str(tmp_path), "g", rows, {"loss": np.zeros((20, 1), np.float32)},
                      np.zeros((1, 4)))
  data = json.loads((tmp_path / "groups" / "g.json").read_text())
  assert data["format"] == workdir_lib.FORMAT
  assert workdir_lib.read_group(str(tmp_path / "groups" / "g.json"))["rows"] == rows
