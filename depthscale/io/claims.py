"""Claims on groups, so that launches sharing a workdir never train a group twice.

A claim is an exclusive fcntl lock on claims/<group>.lock, held while the group trains.
The kernel drops it when its process dies, so a crashed claimant never blocks others.
Imports nothing from depthscale.
"""
from __future__ import annotations

import fcntl
import os


class Claim:
  def __init__(self, workdir: str, group_id: str):
    os.makedirs(os.path.join(workdir, "claims"), exist_ok=True)
    self.path = os.path.join(workdir, "claims", f"{group_id}.lock")
    self.fd = None

  def acquire(self) -> bool:
    """True if this process now holds the claim; False if another live process does."""
    fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      os.close(fd)
      return False
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()} {os.uname().nodename}\n".encode())
    self.fd = fd
    return True

  def release(self) -> None:
    if self.fd is not None:
      fcntl.flock(self.fd, fcntl.LOCK_UN)
      os.close(self.fd)
      self.fd = None

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.release()
    return False
