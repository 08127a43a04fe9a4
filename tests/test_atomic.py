"""The one atomic writer (io/atomic.py): whole or nothing, a full disk in one line naming
the file, no temporary file left behind on any failure, and write_once's first writer wins."""
import errno
import os

import pytest

from depthscale.errors import UserError
from depthscale.io import atomic


def test_a_write_replaces_the_file_whole(tmp_path):
  path = tmp_path / "sub" / "a.json"
  atomic.write(str(path), "one")
  atomic.write(str(path), b"two")
  atomic.write(str(path), lambda f: f.write(b"three"))
  assert path.read_text() == "three" and os.listdir(path.parent) == ["a.json"]
  assert path.stat().st_mode & 0o777 == 0o666 & ~atomic._UMASK


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT])
def test_a_full_disk_is_one_line_and_keeps_the_old_file(tmp_path, monkeypatch, code):
  path = tmp_path / "a.json"
  atomic.write(str(path), "old")

  def full(_fd):
    raise OSError(code, os.strerror(code))
  monkeypatch.setattr(os, "fsync", full)
  with pytest.raises(UserError) as e:
    atomic.write(str(path), "new")
  assert str(path) in str(e.value) and "free space" in str(e.value)
  assert "\n" not in str(e.value) and e.value.__cause__ is None
  assert path.read_text() == "old" and os.listdir(tmp_path) == ["a.json"]


def test_any_failure_removes_the_temporary_file(tmp_path):
  def broken(f):
    f.write(b"half")
    raise KeyboardInterrupt
  with pytest.raises(KeyboardInterrupt):
    atomic.write(str(tmp_path / "a.json"), broken)
  (tmp_path / "d").mkdir()
  with pytest.raises(IsADirectoryError):  # not a full disk: raised as it is
    atomic.write(str(tmp_path / "d"), "x")
  assert os.listdir(tmp_path) == ["d"]


def test_write_once_the_first_writer_wins(tmp_path):
  path = str(tmp_path / "plan.json")
  assert atomic.write_once(path, "first") is True
  assert atomic.write_once(path, "second") is False
  assert open(path).read() == "first" and os.listdir(tmp_path) == ["plan.json"]
