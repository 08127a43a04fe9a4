"""Groups -> results: run a plan in a workdir, resumably, and leave results behind.

A workdir keeps its config (config.json); a rerun with a different study is refused.
Any number of workers (processes, SLURM array tasks, hosts) share one workdir: each pulls
the largest group that is neither finished (groups/<id>.json) nor leased by a live
worker (io/leases.py), trains it from its latest checkpoint, and takes the next, until
every group is finished. SIGTERM, SIGUSR2 and Ctrl-C save a checkpoint at the current step
within seconds and exit cleanly (or hand over to a host's own handler, such as submitit's).
The worker loop only: the study comes resolved (sweep/study.py), the plan frozen
(sweep/plan_file.py), files through io/workdir.py, W&B through sweep/tracking.py.
"""
from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time

from depthscale.io import design_files, leases, results_csv, trackers
from depthscale.io import workdir as workdir_lib
from depthscale.io.checkpoint import GroupCheckpoints
from depthscale.io.leases import Lease, LeaseLost
from depthscale.sweep import design_rounds, plan, plan_file, probe, study as study_lib, tracking
from depthscale.sweep.group_run import GroupRun, Hooks, Interrupted


class StopFlag:
  """Set by SIGTERM / SIGUSR2 / SIGINT (Ctrl-C) while installed; remembers the signal and
  the handler it replaced, so that a host's handler (submitit's requeue) runs once the
  state is saved. Ctrl-C exits 130 after the checkpoint, like a shell's interrupted job."""

  def __init__(self):
    self.set = False
    self.signum = None
    self.previous = {}

  def __call__(self, signum, _frame):
    self.set, self.signum = True, signum

  def install(self):
    for s in (signal.SIGTERM, signal.SIGUSR2, signal.SIGINT):
      self.previous[s] = signal.signal(s, self)
    return self

  def uninstall(self) -> None:
    for s, handler in self.previous.items():
      signal.signal(s, handler)

  def hand_over(self) -> None:
    """Call the replaced handler of the signal received, if it was a Python one (submitit:
    checkpoint() and requeue); then exit 0."""
    if self.signum == signal.SIGINT:
      raise SystemExit(130)  # not Python's handler: its KeyboardInterrupt is a traceback
    prev = self.previous.get(self.signum)
    if callable(prev):
      # submitit's handler runs `scontrol requeue`, which cancels this job step: SLURM then
      # sends SIGTERM to all of the step's processes, that scontrol included, and killed
      # before it exits it fails the task though the requeue went through. A signal this
      # process ignores stays ignored in the processes it starts.
      signal.signal(signal.SIGTERM, signal.SIG_IGN)
      prev(self.signum, None)
    raise SystemExit(0)


def pull(workdir, c, order, stop, exit_when_idle, poll_s):
  """The next group this worker holds a lease on, or None when every group is finished
  (or, with exit_when_idle, when the rest are held by live workers)."""
  waiting = False
  while True:
    left = [g for g in order if not workdir_lib.is_done(workdir, g.id)]
    if not left:
      return None
    for g in left:
      lease = Lease(workdir, g.id, c.lease_s)
      if lease.acquire():
        if workdir_lib.is_done(workdir, g.id):  # finished meanwhile
          lease.release()
          continue
        if lease.took_over is not None:
          old = lease.took_over
          why = (f"its process {old.get('pid')} is gone" if leases.dead_here(old)
                 else f"no heartbeat for {c.lease_s:g} s")
          print(f"depthscale: group {g.id}: the lease of {old.get('owner')} on "
                f"{old.get('host')} lapsed ({why}); taking it over", file=sys.stderr)
        return g, lease
    if all(_ours(leases.latest(workdir, g.id)[1]) for g in left):
      return None  # the rest are this process's other shares' groups: they finish them
    if exit_when_idle:
      print(f"depthscale: {len(left)} groups left, all held by other workers; exiting "
            "(--exit-when-idle)", file=sys.stderr)
      return None
    if not waiting:
      print(f"depthscale: {len(left)} groups left, all held by other workers; waiting to "
            f"take over any whose lease lapses ({c.lease_s:g} s)", file=sys.stderr)
      waiting = True
    for _ in range(max(1, int(poll_s / 0.2))):
      if stop.set:
        print("depthscale: stopped while waiting; nothing to save", file=sys.stderr)
        raise Stopped()
      time.sleep(0.2)


class Stopped(Exception):
  """A stop request was served in a share (its group checkpointed, or nothing held)."""


def _ours(record) -> bool:
  """True if a lease is held by this very process (another share of this worker)."""
  return bool(record) and not record.get("released") and record.get("pid") == os.getpid() \
      and record.get("host") == socket.gethostname()


def run(study: study_lib.Study, workdir: str, progress: bool = True, report=True,
        signals=True, devices=None, exit_when_idle=False) -> list[dict]:
  """Pull and train groups until every group of the study is finished; returns all rows
  in the workdir. The devices are dealt into shares (plan.share_size) that pull groups
  side by side, one thread each. `signals=False` installs no handlers (the caller handles stops)."""
  import jax
  c = study.config
  workdir_lib.check(workdir)
  study.start_jax()
  study_lib.claim_workdir(study, workdir, write=False)  # another study: refused first
  devs = list(devices or jax.local_devices())
  groups = _freeze(study, workdir, devs)
  workdir_lib.say_ignored(workdir_lib.read_groups(workdir)[1])  # never counted
  size = len(plan.share_of(devs, groups))
  shares = [devs[i:i + size] for i in range(0, len(devs), size)]
  stop = StopFlag().install() if signals else StopFlag()
  tracker = tracking.Guarded(tracking.Locked(trackers.WandbTracker(
      workdir, c.name, mode=c.wandb.mode or None, project=c.wandb.project)))
  wall0 = time.perf_counter()
  order = plan.largest_first(study, groups)
  todo = [g for g in order if not workdir_lib.is_done(workdir, g.id)]
  where = (f"{len(shares)} shares of {size} devices side by side" if len(shares) > 1
           else f"{len(devs)} device(s)")
  print(f"depthscale: {len(groups)} groups, {len(todo)} to train, "
        f"{sum(len(g.cells) for g in groups)} models on {where} -> {workdir}", file=sys.stderr)
  summary = threading.Lock()
  trained = []

  def serve(share):
    """One share's loop: pull a group, train it on the share's devices, write it; an
    adaptive design's next round at each barrier, until it stops."""
    while True:
      while (got := pull(workdir, c, order, stop, exit_when_idle, min(5.0, c.lease_s / 4))):
        if train_one(study, workdir, *got, share, tracker, stop, progress):
          trained.append(got[0].id)
          if report:
            with summary:
              tracking.refresh_summary(workdir, tracker)
      if not design_rounds.is_adaptive(study) or not barrier(study, workdir, order, stop,
                                                              exit_when_idle, summary, share):
        return

  try:
    if len(shares) == 1:
      try:
        serve(shares[0])
      except Stopped:
        stop.hand_over()
    else:
      errors = []
      def guarded(share):
        try:
          serve(share)
        except BaseException as e:  # re-raised in the main thread below
          errors.append(e)
          stop.set = stop.set or not isinstance(e, Stopped)  # a bug stops the other shares
      threads = [threading.Thread(target=guarded, args=(sh,), daemon=True) for sh in shares]
      for t in threads:
        t.start()
      for t in threads:
        while t.is_alive():
          t.join(0.2)  # the main thread stays free to take signals
      bugs = [e for e in errors if not isinstance(e, Stopped)]
      if bugs:
        raise bugs[0]
      if errors:
        stop.hand_over()
  finally:
    stop.uninstall()  # Ctrl-C is KeyboardInterrupt again after the run
  if trained and report and design_rounds.is_adaptive(study):
    tracking.refresh_summary(workdir, tracker)  # with the decision that stopped the design
  rows = results_csv.merge_results(workdir)
  if trained and report:
    wall = time.perf_counter() - wall0
    print(f"depthscale: W&B ({tracker.mode}) logging took {tracker.seconds:.1f} s of "
          f"{wall:.1f} s ({100 * tracker.seconds / wall:.1f}%); report: "
          f"{os.path.join(workdir, 'report.md')}", file=sys.stderr)
  return rows


def _freeze(study, workdir, devs) -> list[plan.Group]:
  """The workdir claimed and its plan frozen (an adaptive design's first round); every
  group so far (the rounds decided too)."""
  first = design_rounds.first_study(study)  # a grid: the study itself
  planned = plan_file.fitted(first, workdir, devs)  # the memory fit, before any write
  study_lib.claim_workdir(study, workdir)
  plan_file.freeze_plan(first, workdir, devs, planned)
  return design_rounds.all_groups(study, workdir)


def barrier(study, workdir, order, stop, exit_when_idle, lock, share) -> bool:
  """At an adaptive design's round barrier: the next round decided (once, by whichever
  worker gets here first; its groups fitted to `share`'s memory) and its groups added to
  `order`; False once the design stops (or, with exit_when_idle, while other workers
  still train the round)."""
  while True:
    with lock:  # the shares of this worker decide one at a time
      groups = design_rounds.all_groups(study, workdir)
      if all(workdir_lib.is_done(workdir, g.id) for g in groups):
        state, wrote = design_rounds.advance(study, workdir,
                                             results_csv.merge_results(workdir), share)
        groups = design_rounds.all_groups(study, workdir)
        order[:] = plan.largest_first(study, groups)
        if wrote:
          rec = design_files.read_rounds(workdir)[wrote - 1]
          print(f"depthscale: design decision {wrote}: " + (
              f"stop ({rec['stop']})" if rec["stop"] else
              f"{len(rec['picks'])} models at depths "
              f"{', '.join(str(p['depth']) for p in rec['picks'])}"), file=sys.stderr)
        return state != "stopped"
    if exit_when_idle:
      return False
    for _ in range(10):
      if stop.set:
        raise Stopped()
      time.sleep(0.2)


class WorkerHooks(Hooks):
  """A leased group's hooks: stop on a signal, check the lease and stream the curves
  before every checkpoint, renew the lease with the step and rate."""

  def __init__(self, stop, lease, live, total_steps):
    self.stop, self.lease, self.live, self.total = stop, lease, live, total_steps
    self.slots = None

  def should_stop(self) -> bool:
    return self.stop.set

  def before_save(self, step, curves) -> None:
    self.lease.check()  # raises LeaseLost: nothing is saved
    self.live(step, curves)

  def on_progress(self, step, steps_per_s) -> None:
    self.lease.update(step, self.total, steps_per_s, self.slots)

  def on_slots(self, summary) -> None:
    self.slots = summary  # written with the next progress


def train_group(study, g, devs, checkpoints, hooks, progress):
  """Group g's program and run options, from the Study, trained on `devs` (GroupRun)."""
  return GroupRun(study.program(g), study.run_options(g, devs), devs, checkpoints=checkpoints,
                  hooks=hooks, probed=probe.cached_for(study, g, devs),
                  desc=f"group {g.id} n={g.length}", progress=progress).train()


def train_one(study, workdir, g, lease, devs, tracker, stop, progress) -> bool:
  """Train group `g` (leased) on `devs` and write its results; False if its lease was
  lost (nothing written); raises Stopped after checkpointing on a stop request."""
  c = study.config
  lease.start()
  ckpt = None
  try:  # from here on the lease is released whatever happens (a failure opening the
    # checkpoints included: a rerun then takes the group at once, not after the lease lapses)
    ckpt = GroupCheckpoints(workdir_lib.checkpoint_dir(workdir, g.id))
    live = tracking.LiveCurves(tracker, g)
    res = train_group(study, g, devs, ckpt, WorkerHooks(stop, lease, live,
                                                        study.group_steps(g)), progress)
    lease.check()  # still ours: write the results
    for row, cell in zip(res.rows, g.cells):
      row.update(group=g.id, model=cell.key)
    workdir_lib.write_group(workdir, g.id, res.rows, res.curves, res.per_position_acc)
    live(c.train.steps, res.curves)  # results first: a tracker never costs a group
    tracking.log_group(tracker, res.rows)
  except Interrupted as e:
    print(f"depthscale: stopped; checkpoint of group {g.id} saved at step {e.step}. "
          "Rerun the same command to resume.", file=sys.stderr)
    raise Stopped() from None
  except LeaseLost:
    print(f"depthscale: group {g.id} was taken over by another worker (this worker's "
          "lease lapsed); it wrote nothing more for it", file=sys.stderr)
    return False
  finally:
    lease.release()  # on a stop: the next worker (a requeued task) may resume it at once
    if ckpt is not None:
      ckpt.close()
  print(f"depthscale: group {g.id} done", file=sys.stderr)
  return True
