"""A real full disk and a read-only workdir, on real filesystems (a small tmpfs mounted
for the test; skipped, with the reason, where the test cannot mount one): one line each,
no traceback, nothing half-written left behind."""
import contextlib
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT
from depthscale import cli
from depthscale.io.checkpoint import GroupCheckpoints


@contextlib.contextmanager
def tmpfs(path, size, *options):
  os.makedirs(path, exist_ok=True)
  if shutil.which("mount") is None:
    pytest.skip("no mount command here")
  p = subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join([f"size={size}", *options]),
                      "tmpfs", str(path)], capture_output=True, text=True)
  if p.returncode:
    pytest.skip(f"cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): {p.stderr.strip()}")
  try:
    yield path
  finally:
    subprocess.run(["umount", "-l", str(path)], capture_output=True)


@pytest.mark.slow
def test_a_full_disk_is_one_line_and_leaves_no_temporary_checkpoint(tmp_path):
  with tmpfs(tmp_path / "disk", "96k") as disk:  # config and plan fit; no checkpoint does
    env = dict(os.environ, WANDB_MODE="disabled")
    p = subprocess.run([sys.executable, "-m", "depthscale.cli", "run", "--config",
                        "experiments/quickstart.py:smoke", "--no-progress",
                        "--config.grid.depth=[1]", "--config.grid.seed=[0]",
                        "--config.train.steps=120", "--config.checkpoint_every=60",
                        "--workdir", str(disk / "w")], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 2, p.stderr[-3000:]
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("depthscale: error: ") and "No space left" in last, p.stderr
    assert "free space and rerun" in last.lower(), last
    assert len(p.stderr.strip().splitlines()) <= 4, p.stderr  # the run's header lines + it
    left = [os.path.join(r, d) for r, ds, _ in os.walk(disk) for d in ds
            if "orbax-checkpoint-tmp" in d]
    assert not left, left


def test_stale_temporary_checkpoints_are_removed_when_the_group_is_opened(tmp_path):
  d = tmp_path / "ckpt"
  (d / "60.orbax-checkpoint-tmp-1234" / "state").mkdir(parents=True)
  (d / "60.orbax-checkpoint-tmp-1234" / "state" / "x").write_text("half")
  GroupCheckpoints(str(d)).close()
  assert os.listdir(d) == []


def test_report_on_a_read_only_workdir_is_one_line(reference_run, tmp_path, capsys):
  src, _ = reference_run
  with tmpfs(tmp_path / "ro", "64m") as disk:
    shutil.copytree(src, disk / "w", ignore=shutil.ignore_patterns("checkpoints", "wandb"))
    for name in ("report.md", "fits.json", "claims.json"):
      (disk / "w" / name).unlink(missing_ok=True)
    before = sorted(os.listdir(disk / "w"))
    r = subprocess.run(["mount", "-o", "remount,ro", str(disk)], capture_output=True, text=True)
    if r.returncode:
      pytest.skip(f"cannot remount read-only: {r.stderr.strip()}")
    capsys.readouterr()
    assert cli.main(["report", str(disk / "w")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Read-only file system" in err[0] and "writable" in err[0], err
    assert sorted(os.listdir(disk / "w")) == before
