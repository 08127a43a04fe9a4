"""What every command line of depthscale shares (the `depthscale` CLI and launch/slurm.py):
--config with its --config.a.b=v overrides, option values, output-file checks, and the
one line a user error ends as.
"""
from __future__ import annotations

import argparse
import json
import os
from typing import Any, Sequence

from depthscale import config as config_lib
from depthscale.errors import UserError
from depthscale.io import atomic
from depthscale.io import workdir as workdir_lib


class UsageError(UserError):
  """A mistake in the command line (raised instead of argparse's print-and-exit)."""


class Parser(argparse.ArgumentParser):
  """argparse, with a bad argument raised as a UsageError (one line) instead of printing
  the usage block and exiting."""

  def error(self, message: str):
    raise UsageError(message)


class Once(argparse.Action):
  """An option that names one thing (a study, a workdir): given twice, a one-line
  UsageError, not the last one silently."""

  def __call__(self, parser, namespace, values, option_string=None):
    first = getattr(namespace, self.dest, None)
    if first is not None:
      raise UsageError(f"{option_string} given twice ({first} and {values}); give one")
    setattr(namespace, self.dest, values)


def in_range(flag: str, value: int, lo: int, hi: int, what: str) -> int:
  """`value` of `flag` if lo <= value <= hi, else a one-line UsageError saying `what`."""
  if not lo <= value <= hi:
    raise UsageError(f"{flag} {value}: give {what} in [{lo}, {hi}]")
  return value


def config_overrides(extras: Sequence[str]) -> list[str]:
  """The `a.b=v` of every `--config.a.b=v` left over by argparse; a UserError (one line)
  for anything else."""
  overrides = []
  for e in extras:
    if not e.startswith("--config."):
      raise UserError(f"unrecognized argument {e!r}; overrides look like --config.a.b=v")
    overrides.append(e[len("--config."):])
  return overrides


def load_config(spec: str, extras: Sequence[str]):
  """The study config `spec` (FILE.py[:ARG]) with the overrides in `extras`."""
  return config_lib.load(spec, config_overrides(extras))


def parse_value(text: str) -> Any:
  """An option value from the command line: int, float, true/false/none, else the string."""
  lowered = text.strip().lower()
  if lowered in ("true", "false"):
    return lowered == "true"
  if lowered == "none":
    return None
  for kind in (int, float):
    try:
      return kind(text)
    except ValueError:
      pass
  return text


def check_writable(path: str) -> None:
  """A one-line UsageError unless `path` can be written as a file."""
  if not path:
    raise UsageError("--json is empty; give a file path")
  parent = os.path.dirname(os.path.abspath(path))
  if os.path.isdir(path):
    raise UsageError(f"--json {path!r} is a directory; give a file path")
  if path.endswith(".py"):
    raise UsageError(f"--json {path!r} would overwrite a Python file (a study?); give a "
                     ".json path")
  if os.path.basename(path) in workdir_lib.FILES and os.path.exists(
      os.path.join(parent, "config.json")):
    raise UsageError(f"--json {path!r} is a depthscale workdir's own file; give a path "
                     "outside the workdir's files")
  if not os.path.isdir(parent):
    raise UsageError(f"--json {path!r}: directory {parent!r} does not exist; create it first")
  if os.path.islink(path) and not os.path.exists(path):  # written through: its target's
    to = os.readlink(path)  # directory must be there
    if not os.path.isdir(os.path.dirname(os.path.join(parent, to))):
      raise UsageError(f"--json {path!r} is a symlink to {to}, whose directory does not "
                       "exist; create it, or give another path")
  if not os.access(parent, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
    raise UsageError(f"--json {path!r} is not writable; choose another path")


def write_json(path: str, data) -> None:
  """--json's file, written atomically; a pipe, device or symlink is written in place."""
  text = json.dumps(data, indent=2) + "\n"
  try:
    if os.path.islink(path) or (os.path.exists(path) and not os.path.isfile(path)):
      with open(path, "w") as f:
        f.write(text)
    else:
      atomic.write(path, text)
  except OSError as e:
    raise UserError(f"cannot write --json {path!r} ({e.strerror}); choose another path")


def one_line(message: str) -> str:
  """A user error's message on one line (what the commands print after 'error: ')."""
  return " ".join(str(message).split()) or "invalid input"
