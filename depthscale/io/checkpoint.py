"""Checkpoints of one group's whole stacked state (orbax CheckpointManager).

Saves are synchronous and atomic (orbax writes a temporary directory and renames it),
so a kill -9 at any moment leaves the previous checkpoint intact. A latest checkpoint
that fails to restore is reported and the one before it is used.
Each process checkpoints its own groups alone (active_processes = itself), from host
copies of the state, so several JAX processes never wait on each other here.
A save that fails for want of space (ENOSPC, EDQUOT, or orbax's RESOURCE_EXHAUSTED) is a
UserError naming the kept checkpoint; its temporary directory is removed, and any left by
a kill is removed when the group's checkpoints are next opened. So is a directory that
refuses writes (its mode, an immutable flag, a read-only mount; `run` finds those before
anything compiles, this is for one changed while it runs).
Knows nothing of models or sweeps.
"""
from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import shutil
import sys
import traceback

import jax
import orbax.checkpoint as ocp

from depthscale.errors import UserError
from depthscale.io.places import unwritable_message


SLACK_BYTES = 1 << 20  # metadata and filesystem blocks on top of the arrays' bytes
READ_ERROR = re.compile(r"^[A-Z_]+: .*Error (reading|opening|decoding)")  # tensorstore's


class GroupCheckpoints:
  def __init__(self, directory: str, max_to_keep: int = 2):
    me = jax.process_index()
    alone = ocp.options.MultiprocessingOptions(
        primary_host=me, active_processes={me},
        barrier_sync_key_prefix=f"depthscale-{me}-{os.path.basename(directory)}")
    try:
      os.makedirs(directory, exist_ok=True)
    except OSError as e:
      if not unwritable(e):
        raise
      raise UserError(unwritable_message(os.path.dirname(directory), e)) from None
    clean_temporary(directory)  # left by a save that a full disk or a kill cut short
    with _library_logs_quiet():  # it reads each step's metadata: a damaged one is said
      self.manager = ocp.CheckpointManager(  # by restore_latest, in one line
          directory, options=ocp.CheckpointManagerOptions(
              max_to_keep=max_to_keep, create=False, enable_async_checkpointing=False,
              multiprocessing_options=alone))

  def save(self, step: int, tree, metadata: dict | None = None) -> None:
    """`tree` at `step`, with `metadata` (small JSON: what restoring must know first)."""
    host = jax.device_get(tree)
    need = sum(getattr(x, "nbytes", 8) for x in jax.tree.leaves(host)) + SLACK_BYTES
    free = shutil.disk_usage(self.manager.directory).free
    if free < need:  # before orbax starts: its own failure is tracebacks from threads
      raise self._full(step, f"{free / 2**20:.1f} MiB free, {need / 2**20:.1f} MiB needed")
    try:
      self.manager.save(step, args=ocp.args.StandardSave(host),
                        custom_metadata=metadata or {})
      self.manager.wait_until_finished()
    except Exception as e:  # noqa: BLE001 -- re-raised unless the disk is full or read-only
      if not (disk_full(e) or unwritable(e)):
        raise
      clean_temporary(str(self.manager.directory))
      if unwritable(e):  # made read-only or immutable since the run started
        raise self._unwritable(step, e) from None
      raise self._full(step, "the disk filled up during the save") from None

  def _unwritable(self, step: int, e: Exception) -> UserError:
    kept = self.manager.latest_step()
    return UserError(unwritable_message(
        str(self.manager.directory), e if isinstance(e, OSError) else OSError(str(e)),
        f"the step-{step} checkpoint was not saved; " + (
            f"the step-{kept} checkpoint is kept and resumed from" if kept is not None
            else "no earlier checkpoint")))

  def _full(self, step: int, why: str) -> UserError:
    kept = self.manager.latest_step()
    then = (f"the step-{kept} checkpoint is kept: free space and rerun the same command to "
            "resume from it") if kept is not None else (
            "no earlier checkpoint: free space and rerun the same command")
    return UserError(f"No space left on the device for the step-{step} checkpoint in "
                     f"{self.manager.directory} ({why}); {then}")

  def restore_latest(self, like, check=None, older=()):
    """(step, tree) of the newest checkpoint that restores and that `check(step, tree)`
    finds nothing wrong with (it returns None, or what is wrong), or (None, None); one line
    per checkpoint that does not (orbax's own error logs for it silenced: the line says it).
    `older`: the shapes an earlier version saved, each tried in turn where `like` fails."""
    shapes = [jax.tree.map(ocp.utils.to_shape_dtype_struct, jax.device_get(x))
              for x in (like, *older)]
    _drop_late_callbacks_to_closed_loops()  # before any read can fail
    _drop_unretrieved_read_errors()
    for step in sorted(self.manager.all_steps(), reverse=True):
      tree, errors = None, []
      for abstract in shapes:
        try:
          with _library_logs_quiet():
            tree = self.manager.restore(step, args=ocp.args.StandardRestore(abstract))
          break
        except Exception as e:  # corrupt, half-written, or of another shape
          errors.append(e)
      if tree is None:  # fall back to the previous one; the current shape's error named
        error = errors[0]
        print(f"depthscale: checkpoint step {step} in {self.manager.directory} is unreadable "
              f"({type(error).__name__}); trying the previous one", file=sys.stderr)
        continue
      why = check(step, tree) if check is not None else None
      if why is None:
        return step, tree
      print(f"depthscale: checkpoint step {step} in {self.manager.directory} is inconsistent "
            f"({why}); trying the previous one", file=sys.stderr)
    return None, None

  def metadata(self, step: int) -> dict:
    """The metadata saved with `step` ({} for a checkpoint saved without it)."""
    try:
      return dict(self.manager.metadata(step).custom_metadata or {})
    except Exception:  # noqa: BLE001 -- unreadable metadata: as if none was saved
      return {}

  def close(self) -> None:
    self.manager.close()


@contextlib.contextmanager
def _library_logs_quiet():
  """absl's logger (orbax logs through it) above ERROR for the block."""
  logger = logging.getLogger("absl")
  level = logger.level
  logger.setLevel(logging.CRITICAL)
  try:
    yield
  finally:
    logger.setLevel(level)


def _drop_late_callbacks_to_closed_loops() -> None:
  """When a restore fails, tensorstore may finish reads orbax no longer waits for: their
  done-callbacks post to the event loop orbax has closed, and tensorstore reports each
  RuntimeError('Event loop is closed') through sys.unraisablehook, a traceback after
  depthscale's one line. Those (and only those) are dropped; every other unraisable
  exception reaches the hook that was there before. Installed once per process, by the
  first restore."""
  before = sys.unraisablehook
  if getattr(before, "_depthscale", False):
    return

  def hook(u):
    if not _late_callback_to_closed_loop(u):
      before(u)
  hook._depthscale = True
  sys.unraisablehook = hook


def _late_callback_to_closed_loop(u) -> bool:
  if u.object is not None or u.exc_type is not RuntimeError or \
      str(u.exc_value) != "Event loop is closed":
    return False
  frames = [f.name for f in traceback.extract_tb(u.exc_traceback)]
  return frames[-2:] == ["call_soon_threadsafe", "_check_closed"]


def _drop_unretrieved_read_errors() -> None:
  """When a restore fails, orbax raises one read's error and leaves the other failed
  reads' tasks unretrieved; asyncio logs each as "Task exception was never retrieved" with
  a traceback when it is collected (during the restore or later, as the collector runs),
  before or after depthscale's one line. A filter on asyncio's logger drops those records
  (and only those: a task wrapping a C future, tensorstore's, whose error is a tensorstore
  status naming a read); every other asyncio record still prints. Installed once per
  process, by the first restore."""
  logger = logging.getLogger("asyncio")
  if any(getattr(f, "_depthscale", False) for f in logger.filters):
    return

  def keep(record) -> bool:
    return not _unretrieved_read_error(record)
  keep._depthscale = True
  logger.addFilter(keep)


def _unretrieved_read_error(record) -> bool:
  exc = record.exc_info[1] if record.exc_info else None
  if not str(record.msg).startswith("Task exception was never retrieved") or \
      type(exc) is not ValueError or not READ_ERROR.search(str(exc)):
    return False
  frames = traceback.extract_tb(exc.__traceback__)
  return [f.name for f in frames] == ["_wrap_awaitable"]  # a C future: tensorstore's


def disk_full(e: BaseException) -> bool:
  """True for a full disk or quota as the OS (ENOSPC, EDQUOT) or as orbax / tensorstore
  (a ValueError "RESOURCE_EXHAUSTED: ... No space left on device") report it."""
  if isinstance(e, OSError):
    return e.errno in (errno.ENOSPC, errno.EDQUOT)
  text = str(e)
  return "RESOURCE_EXHAUSTED" in text or "No space left" in text or "quota" in text.lower()


def unwritable(e: BaseException) -> bool:
  """True for a directory that refuses writes (EACCES, EPERM: its mode, owner or an
  immutable flag; EROFS: a read-only mount), as the OS or tensorstore reports it."""
  if isinstance(e, OSError):
    return e.errno in (errno.EACCES, errno.EPERM, errno.EROFS)
  text = str(e)
  return "PERMISSION_DENIED" in text or "Read-only file system" in text


def clean_temporary(directory: str) -> None:
  """Remove the temporary directories of unfinished saves (orbax's *.orbax-checkpoint-tmp*);
  restores never read them, and the group's lease holder is the only writer here."""
  for name in os.listdir(directory) if os.path.isdir(directory) else []:
    if ".orbax-checkpoint-tmp" in name:
      shutil.rmtree(os.path.join(directory, name), ignore_errors=True)
