"""Leases on groups: which worker trains a group, renewed while it trains, taken over
when its holder stops renewing. No flock or fcntl (those are node-local or missing on
cluster filesystems such as Lustre and BeeGFS): only atomic file creation (io/atomic.py).

A group's lease history is a series of files leases/<group>.<generation>. A worker takes
generation g+1 by linking a complete record to its name (atomic.write_once), which exactly
one writer wins, and only when generation g is released or stale (its heartbeat older than
`lease_s`). The holder of g has lost the group as soon as a file g+1 exists; it checks
before every save and before writing results (`Lease.check`). Heartbeats are wall-clock
times written by the holder (hosts of one cluster are assumed NTP-synchronised to well
under lease_s).
"""
from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid

from depthscale.errors import UserError
from depthscale.io import atomic

DIR = "leases"
PROGRESS_S = 1.0  # most frequent progress write of a lease (step, steps/s)
MIN_BEAT_S = 0.25  # most frequent heartbeat, whatever lease_s


class LeaseLost(Exception):
  """Another worker took this worker's group over (its lease lapsed)."""


def _read(path: str) -> dict | None:
  """A lease record; a file that does not parse (damaged, or half-written by a version
  without io/atomic.py) reads as a record whose heartbeat is the file's mtime."""
  try:
    with open(path) as f:
      return json.load(f)
  except ValueError:
    try:
      return {"heartbeat": os.path.getmtime(path), "unreadable": True}
    except OSError:
      return None
  except OSError:  # vanished
    return None


def check_records(workdir: str) -> None:
  """A UserError (one line naming the file) for a lease file that parses but is not a
  lease record (a half-written one, which does not parse, is left to `_read`)."""
  d = os.path.join(workdir, DIR)
  for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
    path = os.path.join(d, name)
    if not name.rpartition(".")[2].isdigit():
      continue  # a temporary file of a heartbeat write
    try:
      with open(path) as f:
        rec = json.load(f)
    except ValueError:
      continue
    except OSError as e:
      raise UserError(f"{path}: cannot read it ({e.strerror}); move it aside") from None
    bad = _bad_field(rec) if isinstance(rec, dict) else type(rec).__name__
    if bad:
      raise UserError(f"{path} is not a depthscale lease record ({bad}); move it aside (no "
                      "worker holds that group through it)")


_NUMBER, _INT = (int, float), (int,)
FIELDS = {"heartbeat": _NUMBER, "started": _NUMBER, "pid": _INT, "step": _INT, "total_steps": _INT,
          "steps_per_s": _NUMBER, "host": (str,), "owner": (str,), "released": (bool,),
          "slots": (dict,)}
SLOT_FIELDS = ("busy", "slots", "queued", "stopped")


def _bad_field(rec: dict) -> str | None:
  """The first field of a lease record of another type than a worker writes, in words."""
  for k, kinds in FIELDS.items():
    v = rec.get(k)
    if v is None:
      continue
    if not isinstance(v, kinds) or (bool not in kinds and isinstance(v, bool)):
      return f"{k} = {v!r}"
    if k == "slots" and not all(isinstance(v.get(f), int) for f in SLOT_FIELDS):
      return f"slots = {v!r}"
  return None


def generations(workdir: str, group_id: str) -> list[int]:
  """The generations of a group's lease files, oldest first."""
  try:
    names = os.listdir(os.path.join(workdir, DIR))
  except FileNotFoundError:
    return []
  prefix = group_id + "."
  return sorted(int(n[len(prefix):]) for n in names
                if n.startswith(prefix) and n[len(prefix):].isdigit())


def latest(workdir: str, group_id: str) -> tuple[int, dict | None]:
  """(generation, record) of a group's newest lease; (0, None) if it never had one."""
  gens = generations(workdir, group_id)
  if not gens:
    return 0, None
  g = gens[-1]
  return g, _read(os.path.join(workdir, DIR, f"{group_id}.{g}"))


def dead_here(record: dict) -> bool:
  """True if the holder ran on this host and its process is gone (a kill -9 rerun need not
  wait lease_s). Other hosts' holders are judged by their heartbeat alone."""
  if record.get("host") != socket.gethostname() or not record.get("pid"):
    return False
  try:
    os.kill(record["pid"], 0)
  except ProcessLookupError:
    return True
  except PermissionError:  # alive, another user's
    return False
  return False


def state(record: dict | None, lease_s: float, now: float | None = None) -> str:
  """'free' (never leased or released), 'held' (heartbeat fresh) or 'stale' (heartbeat
  older than lease_s, or its holder's process on this host is gone)."""
  if record is None or record.get("released"):
    return "free"
  if dead_here(record):
    return "stale"
  now = time.time() if now is None else now
  # a record still being written (no heartbeat yet) counts as just created: held; a
  # heartbeat further in the future than lease_s is no clock skew but a damaged record
  age = now - record.get("heartbeat", now)
  return "stale" if abs(age) > lease_s else "held"


class Lease:
  """This worker's lease on one group. `acquire`, then `start` the heartbeat thread,
  `update` the progress it reports, `check` before writing, `release` when done."""

  def __init__(self, workdir: str, group_id: str, lease_s: float, owner: str | None = None):
    self.dir = os.path.join(workdir, DIR)
    self.workdir, self.group_id, self.lease_s = workdir, group_id, lease_s
    self.owner = owner or uuid.uuid4().hex[:12]
    self.generation = 0
    self.record: dict = {}
    self.took_over: dict | None = None  # the stale record this lease replaced
    self._lock = threading.Lock()
    self._stop = threading.Event()
    self._thread: threading.Thread | None = None
    self._written = 0.0

  @property
  def path(self) -> str:
    return os.path.join(self.dir, f"{self.group_id}.{self.generation}")

  def acquire(self) -> bool:
    """True if this worker now holds the group; False if a live holder has it (or another
    worker won the race for it)."""
    os.makedirs(self.dir, exist_ok=True)
    g, record = latest(self.workdir, self.group_id)
    st = state(record, self.lease_s)
    if st == "held":
      return False
    now = time.time()
    self.record = dict(owner=self.owner, host=socket.gethostname(), pid=os.getpid(),
                       started=now, heartbeat=now, step=None, steps_per_s=None,
                       total_steps=None, released=False)
    self.generation = g + 1
    if not atomic.write_once(self.path, json.dumps(self.record)):
      return False
    self.took_over = record if st == "stale" else None
    return True

  def _write(self) -> None:
    self._written = time.time()
    atomic.write(self.path, json.dumps(self.record))

  def held(self) -> bool:
    """True while no later generation exists (nobody took the group over)."""
    return generations(self.workdir, self.group_id)[-1:] == [self.generation]

  def check(self) -> None:
    """Renew the heartbeat if the group is still ours; else raise LeaseLost."""
    with self._lock:
      if not self.held():
        raise LeaseLost(f"group {self.group_id}: lease taken over by another worker")
      self.record["heartbeat"] = time.time()
      self._write()

  def update(self, step: int, total_steps: int, steps_per_s: float | None,
             slots: dict | None = None) -> None:
    """Progress shown by `depthscale status`: written at once the first time, then at
    most every PROGRESS_S seconds (and with every heartbeat). `slots`: a group with a
    stopping rule or a queue (sweep/slots.summary)."""
    with self._lock:
      first = self.record.get("step") is None
      self.record.update(step=step, total_steps=total_steps, steps_per_s=steps_per_s)
      if slots is not None:
        self.record["slots"] = slots
      if (first or time.time() - self._written >= PROGRESS_S) and self.held():
        self.record["heartbeat"] = time.time()
        self._write()

  def start(self) -> "Lease":
    """Renew the heartbeat every lease_s / 4 in a daemon thread until released (a stopped
    or frozen process stops renewing, so its lease lapses)."""
    def beat():
      while not self._stop.wait(max(self.lease_s / 4, MIN_BEAT_S)):
        try:
          self.check()
        except LeaseLost:
          return
        except (OSError, UserError):  # a transient filesystem error, or a full disk:
          pass  # retry at the next beat
    self._thread = threading.Thread(target=beat, name=f"lease-{self.group_id}", daemon=True)
    self._thread.start()
    return self

  def release(self) -> None:
    """Stop renewing; mark the lease released (if still ours) so that another worker may
    take the group at once (to resume it, or to see it done)."""
    self._stop.set()
    if self._thread is not None:
      self._thread.join()
    with self._lock:
      if self.generation and self.held():
        self.record.update(released=True, heartbeat=time.time())
        self._write()
