"""The one writer of every file a command writes: a temporary file beside the target,
written, flushed and fsynced, then renamed over it (`write`) or linked to it only if it
is absent (`write_once`: the first writer wins). A reader, or a killed writer, never sees
half a file; a full disk is one UserError line naming the file; the temporary file never
stays behind. Files get the permissions an ordinary open() would give (0666 less umask)."""
from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from typing import BinaryIO, Callable, Union

from depthscale.errors import UserError

Data = Union[str, bytes, Callable[[BinaryIO], None]]  # text (UTF-8), bytes, or a writer
FULL = (errno.ENOSPC, errno.EDQUOT)
PREFIX = ".tmp-"  # temporary files are hidden: no reader's glob (*.json, x.*) sees them
_UMASK = os.umask(0o022)  # read once, at import (os.umask can only be read by setting it)
os.umask(_UMASK)


def write(path: str, data: Data) -> None:
  """Write `path` whole or not at all (on any failure the old file, if any, is kept)."""
  with _one_line_if_full(path):
    tmp = _staged(path, data)
    try:
      os.replace(tmp, path)
    except BaseException:
      _remove(tmp)
      raise


def write_once(path: str, data: Data) -> bool:
  """Write `path` unless it exists (a hard link of a complete temporary file, which
  exactly one of several racing writers wins); True if this call wrote it."""
  with _one_line_if_full(path):
    tmp = _staged(path, data)
    try:
      os.link(tmp, path)
      return True
    except FileExistsError:
      return False
    finally:
      _remove(tmp)


def _staged(path: str, data: Data) -> str:
  """A complete, fsynced temporary file in `path`'s directory (made if need be)."""
  d = os.path.dirname(path) or "."
  os.makedirs(d, exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=d, prefix=PREFIX)
  try:
    with os.fdopen(fd, "wb") as f:
      if callable(data):
        data(f)
      else:
        f.write(data.encode() if isinstance(data, str) else data)
      f.flush()
      os.fsync(f.fileno())
    os.chmod(tmp, 0o666 & ~_UMASK)
  except BaseException:
    _remove(tmp)
    raise
  return tmp


def _remove(tmp: str) -> None:
  with contextlib.suppress(FileNotFoundError):
    os.unlink(tmp)


@contextlib.contextmanager
def _one_line_if_full(path: str):
  """A full disk or quota (ENOSPC, EDQUOT) as one UserError line; other errors as they are."""
  try:
    yield
  except OSError as e:
    if e.errno not in FULL:
      raise
    raise UserError(f"{os.strerror(e.errno)} while writing {path}; free space and rerun the "
                    "same command (nothing finished is lost)") from None
