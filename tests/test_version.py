"""`depthscale --version` prints setup.cfg's version (CHANGELOG.md names the releases)."""
import configparser
import os
import subprocess
import sys

import pytest

from depthscale import cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def setup_cfg_version() -> str:
  parser = configparser.ConfigParser()
  parser.read(os.path.join(ROOT, "setup.cfg"))
  return parser.get("metadata", "version")


@pytest.mark.parametrize("how", ["process", "in_process"])
def test_version_is_setup_cfgs(how, capsys):
  want = f"depthscale {setup_cfg_version()}"
  if how == "process":
    out = subprocess.run([sys.executable, "-m", "depthscale.cli", "--version"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
  else:
    with pytest.raises(SystemExit) as exit_:
      cli.main(["--version"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
  assert out.strip() == want


def test_the_changelog_names_this_version_as_its_last_release():
  with open(os.path.join(ROOT, "CHANGELOG.md")) as f:
    text = f.read()
  assert f"## {setup_cfg_version()} (" in text
