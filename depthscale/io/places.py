"""Where a workdir may be: a path the filesystem can hold, no symlink on it that leads
nowhere, directories that take writes. Each is a one-line UserError naming the path and
what to change, found before anything is made or compiled. Needs no JAX."""
from __future__ import annotations

import errno
import os
import tempfile

from depthscale.errors import UserError

NAME_MAX, PATH_MAX = 255, 4096
PROBE = ".depthscale-check-"  # the empty directory made and removed to probe for writes


def check_path(workdir: str) -> None:
  """A one-line UserError for a workdir path the filesystem cannot hold (a name over
  255 bytes, a path over 4096 with room for the files under it), an empty one, or one
  that is not UTF-8 (the workdir's own files record it), before anything is made."""
  if not workdir:
    raise UserError("--workdir is empty; give a directory path")
  full = os.path.abspath(workdir)
  try:
    full.encode()
  except UnicodeEncodeError:  # bytes the filesystem holds but config.json cannot
    raise UserError(f"--workdir {os.fsencode(workdir)!r} is not UTF-8 text; choose a "
                    "--workdir whose name is UTF-8") from None
  for part in full.split(os.sep):
    if len(part.encode()) > NAME_MAX:
      raise UserError(f"--workdir: the name {part[:40]!r}... is {len(part.encode())} bytes; "
                      f"a file name holds at most {NAME_MAX}: choose a shorter --workdir")
  if len(full.encode()) > PATH_MAX - 256:
    raise UserError(f"--workdir: the path is {len(full.encode())} bytes; with the files "
                    f"under it a path holds at most {PATH_MAX}: choose a shorter --workdir")


def check_link(workdir: str, run: bool = True) -> None:
  """A one-line UserError if `workdir`, or a directory above it, is a symlink that leads
  nowhere (its target missing, or a loop): nothing can be made or read through it.
  `run`: said to `run` (--workdir, which would make the workdir), else to status and
  report (a workdir argument, which must hold a study)."""
  path = os.path.normpath(workdir)
  while path not in ("", ".", os.sep) and not os.path.exists(path):
    if os.path.islink(path):
      why, fix = "which does not exist", "create its target"
      try:
        os.stat(path)
      except OSError as e:
        if e.errno == errno.ELOOP:
          why, fix = "which leads back to itself (a loop)", "point it at a directory"
      fix = f"{fix}, or give another --workdir" if run else \
          "point it at the study's workdir, or give that workdir"
      where = "" if path == os.path.normpath(workdir) else f": {path}"
      raise UserError(f"{'--workdir' if run else 'workdir'} {workdir}{where} is a symlink "
                      f"to {os.readlink(path)}, {why}; {fix}")
    path = os.path.dirname(path)


def check_exists(workdir: str) -> None:
  """A one-line UserError unless `workdir` is a directory (for status and report)."""
  check_link(workdir, run=False)
  if os.path.exists(workdir) and not os.path.isdir(workdir):
    raise UserError(f"workdir {workdir!r} is a file; give the study's workdir (a directory)")
  if not os.path.isdir(workdir):
    raise UserError(f"no such workdir {workdir!r}")


def check_writable(dirs: list[str]) -> None:
  """A one-line UserError naming the first of `dirs` (those that exist) that refuses
  writes: its mode or owner, an immutable flag (which stops root too), a read-only mount.
  Each is probed by making and removing an empty directory in it; nothing stays."""
  for d in dirs:
    if not os.path.isdir(d):
      continue
    try:
      os.rmdir(tempfile.mkdtemp(dir=d, prefix=PROBE))
    except OSError as e:
      raise UserError(unwritable_message(d, e)) from None


def unwritable_message(directory: str, e: OSError, kept: str = "nothing in it was changed"
                       ) -> str:
  """The one line for a workdir directory that refuses writes."""
  return (f"{directory} cannot be written ({e.strerror or e}); make it writable (its mode "
          "or owner, `chattr -i`, or a read-write mount) and rerun the same command, or give "
          f"another --workdir ({kept})")
