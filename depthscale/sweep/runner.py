"""Groups -> results: run a plan in a workdir, resumably, and leave results behind.

A workdir keeps its config (config.json); a rerun with a different study is refused.
Any number of workers (processes, SLURM array tasks, hosts) share one workdir: each pulls
the largest group that is neither finished (groups/<id>.json) nor leased by a live
worker (io/leases.py), trains it from its latest checkpoint, and takes the next, until
every group is finished. SIGTERM and SIGUSR2 save a checkpoint at the current step within
seconds and exit cleanly (or hand over to a host's own handler, such as submitit's).
Imports config, sweep.grid/plan/group and io/.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import sys
import tempfile
import threading
import time

from depthscale import config as config_lib
from depthscale import devices as devices_lib
from depthscale.core import train
from depthscale.io import leases, results, trackers
from depthscale.io.leases import Lease, LeaseLost
from depthscale.io.checkpoint import GroupCheckpoints
from depthscale.sweep import grid, plan
from depthscale.sweep.group import Interrupted, train_group

# Fields that may change between runs of one workdir without changing its results.
NON_IDENTITY = ("wandb", "plan", "checkpoint_every", "paper_fit", "name", "lease_s", "report")


def reproducible_xla() -> None:
  """Make a run's numbers a function of (study, versions, device kind and count) only.
  On GPU, XLA's scatter-add (the embedding gradient) is otherwise non-deterministic:
  --xla_gpu_deterministic_ops=true (added to XLA_FLAGS unless it names the flag; takes
  effect only if JAX has not started its backends yet, as in `depthscale run`). Float32
  matmuls run at full float32 precision ("highest"), not as TF32 (GPU) or bf16 passes
  (TPU); a bfloat16 compute dtype is an explicit choice of its own. The PRNG is pinned to
  the partitionable threefry so that sharding never changes a random stream. No effect
  on CPU results."""
  import jax
  flags = os.environ.get("XLA_FLAGS", "")
  if "xla_gpu_deterministic_ops" not in flags:
    os.environ["XLA_FLAGS"] = f"{flags} --xla_gpu_deterministic_ops=true".strip()
  jax.config.update("jax_default_matmul_precision", "highest")
  jax.config.update("jax_threefry_partitionable", True)


def identity(c) -> dict:
  d = json.loads(c.to_json_best_effort())
  return {k: v for k, v in d.items() if k not in NON_IDENTITY}


def check_workdir(workdir: str) -> None:
  """A one-line UserError unless `workdir` is (or can be created as) a writable
  directory whose results files all read; writes nothing that stays."""
  if os.path.exists(workdir) and not os.path.isdir(workdir):
    raise config_lib.ConfigError(f"--workdir {workdir!r} is a file; give a directory")
  parent = os.path.abspath(workdir)
  while not os.path.exists(parent):
    parent = os.path.dirname(parent)
  if not os.path.isdir(parent):
    raise config_lib.ConfigError(f"--workdir {workdir!r}: {parent!r} is a file; give a "
                                 "directory path")
  try:
    os.rmdir(tempfile.mkdtemp(dir=parent, prefix=".depthscale-check-"))
  except OSError as e:
    raise config_lib.ConfigError(f"--workdir {workdir!r}: cannot write in {parent!r} "
                                 f"({e.strerror}); choose another --workdir") from None
  if os.path.isdir(workdir):
    results.read_groups(workdir)  # corrupt or foreign group files: refuse now


def prepare_workdir(c, workdir: str) -> None:
  """Write config.json, or refuse (one line) if the workdir holds another study. A rerun
  of the same study with other claims (the `report` section) updates config.json."""
  path = os.path.join(workdir, "config.json")
  if os.path.exists(path):
    with open(path) as f:
      saved = json.load(f)
    old = config_lib.defaults()  # fields added since the workdir was made: their defaults
    with old.unlocked():
      old.update(saved)
    old = json.loads(old.to_json_best_effort())
    new = json.loads(c.to_json_best_effort())
    diff = sorted(k for k in set(identity(c)) | {k for k in old if k not in NON_IDENTITY}
                  if old.get(k) != new.get(k))
    if diff:
      raise config_lib.ConfigError(
          f"workdir {workdir} holds a different study ({', '.join(diff)} differ); "
          "use a new --workdir or rerun with the original config")
    if old.get("report") != new.get("report"):  # edited claims reach the next report
      results.write_atomic(path, c.to_json_best_effort(indent=2))
    return
  os.makedirs(workdir, exist_ok=True)
  results.write_atomic(path, c.to_json_best_effort(indent=2))


def train_config(c, length: int, g: plan.Group | None = None) -> train.TrainConfig:
  """The group's TrainConfig; the memory fit's models_per_chunk (if any) wins; the
  plan's layout (pad or compact)."""
  t = c.train
  return train.TrainConfig(batch_size=t.batch_size, length=length, total_steps=t.steps,
                           curriculum=t.curriculum, steps_per_stage=t.steps_per_stage,
                           advance_at=t.advance_at, decay=t.decay, clip_norm=t.clip_norm,
                           models_per_chunk=(g and g.models_per_chunk) or t.models_per_chunk,
                           layout=g.layout if g else "pad")


def model_options(c, g: plan.Group | None = None) -> dict:
  """The study's model options (ModelConfig fields); the memory fit's remat (if any) wins."""
  m = c.model
  return dict(pos=m.pos, mlp_ratio=m.mlp_ratio, dtype=m.dtype,
              compute_dtype=None if m.compute_dtype == "float32" else m.compute_dtype,
              attention=m.attention, remat=(g and g.remat) or m.remat)


def start_jax(c) -> None:
  """JAX settings every program of the study is compiled under (run and plan alike)."""
  reproducible_xla()
  if c.model.dtype == "float64":
    import jax
    jax.config.update("jax_enable_x64", True)


def flops_per_s(c, devs) -> float:
  """The rate the planner's `auto` strategy assumes: the table's peak for a known
  accelerator in the study's compute dtype times plan.mfu; plan.gflops otherwise (CPU)."""
  spec = devices_lib.from_kind(devs[0].device_kind)
  if spec is None:
    return c.plan.gflops * 1e9
  dtype = "bfloat16" if c.model.compute_dtype == "bfloat16" else "float32"
  return spec.peak_tflops[dtype] * 1e12 * c.plan.mfu * len(devs)


def memory_limit(c, devs) -> float | None:
  """Bytes one device may use: plan.device_memory_gb if set, else the runtime's limit
  (GPU/TPU); None (no fit) on a CPU without plan.device_memory_gb."""
  if c.plan.device_memory_gb:
    return c.plan.device_memory_gb * 2**30
  return devices_lib.memory_limit_bytes(devs[0])


def fitted(c, task, groups, devs, log=lambda line: None):
  """The groups after the memory fit, measured from XLA's compiled memory analysis of
  each candidate program (cached per signature, see sweep/probe.py)."""
  from depthscale.sweep import probe
  limit = memory_limit(c, devs)
  if limit is None:
    return groups
  def measure(g):
    return probe.measure_memory(task, g.specs, train_config(c, g.length, g),
                                model_options(c, g), c.train.steps_per_call, devs)
  return plan.fit_memory(groups, limit, measure, c, task.seq_len, task.input_vocab or 0,
                         task.output_dim(max(c.grid.length)), log=log)


def frozen_plan(c, workdir, task, devs):
  """The workdir's plan: plan.json if a worker wrote it, else planned and fitted here for
  these devices and written (the first writer wins), so every worker and `status` use
  the same groups whatever device each runs on."""
  path = os.path.join(workdir, "plan.json")
  if not os.path.exists(path):
    _, groups = planned(c, flops_per_s(c, devs))
    slot = devs[:plan.slot_size(len(devs), [len(g.cells) for g in groups])]  # runs a group
    groups = fitted(c, task, groups, slot, log=lambda line: print(f"depthscale: {line}",
                                                                  file=sys.stderr))
    text = json.dumps(dict(format=1, device=devs[0].device_kind, devices=len(devs),
                           groups=plan.to_json(groups)), indent=1)
    fd, tmp = tempfile.mkstemp(dir=workdir, prefix=".plan-")
    with os.fdopen(fd, "w") as f:
      f.write(text)
    try:
      os.link(tmp, path)  # fails if another worker's plan is there: use that one
    except FileExistsError:
      pass
    finally:
      os.unlink(tmp)
  return read_plan(c, workdir)


def read_plan(c, workdir):
  """The groups of the workdir's plan.json, or a one-line ConfigError."""
  try:
    with open(os.path.join(workdir, "plan.json")) as f:
      return plan.from_json(json.load(f)["groups"], grid.cells(c))
  except (ValueError, KeyError, TypeError) as e:
    raise config_lib.ConfigError(f"{workdir}/plan.json does not match the study ({e}); "
                                 "use a new --workdir") from None


class StopFlag:
  """Set by SIGTERM / SIGUSR2 while installed; remembers the signal and the handler it
  replaced, so that a host's handler (submitit's requeue) runs once the state is saved."""

  def __init__(self):
    self.set = False
    self.signum = None
    self.previous = {}

  def __call__(self, signum, _frame):
    self.set, self.signum = True, signum

  def install(self):
    for s in (signal.SIGTERM, signal.SIGUSR2):
      self.previous[s] = signal.signal(s, self)
    return self

  def hand_over(self) -> None:
    """Call the replaced handler of the signal received, if it was a Python one (submitit:
    checkpoint() and requeue); then exit 0."""
    prev = self.previous.get(self.signum)
    if callable(prev):
      prev(self.signum, None)
    raise SystemExit(0)


def planned(c, flops_per_s: float | None = None):
  """(task, groups) before the memory fit; validates the config first."""
  task = config_lib.validate(c)
  cells = grid.cells(c)
  vocab, out_dim = task.input_vocab or 0, task.output_dim(max(c.grid.length))
  groups = plan.make_plan(cells, c, task.seq_len, out_dim, vocab, flops_per_s)
  if c.plan.device_memory_gb:
    plan.check_params_fit(groups, c.plan.device_memory_gb * 2**30, c, task.seq_len, vocab,
                          out_dim)
  return task, groups


def log_group(tracker, rows, res):
  """Each model's W&B run gets its final config and summary (n*, losses); its curves
  were streamed by LiveCurves."""
  for row in rows:
    summary = {k: row[k] for k in ("n_star", "k_star", "final_loss", "eval_loss", "seq_acc",
                                   "frozen") if k in row}
    tracker.log_model(row["model"], model_conf(row), {"step": []}, summary)


def largest_first(c, task, groups):
  """The order in which workers pull groups: the planner's cost, largest first."""
  cost = plan.cost_fn(task, c, task.output_dim(max(c.grid.length)))
  return sorted(groups, key=cost, reverse=True)


def cached_probe(c, task, g, devs):
  """The probe `depthscale plan` (or an earlier worker) measured for this group's
  program on these devices, or None."""
  from depthscale.sweep import probe
  return probe.cached(probe.signature(task, g.specs, train_config(c, g.length, g),
                                      model_options(c, g), c.train.steps_per_call, devs))


def model_conf(row) -> dict:
  return {k: row[k] for k in ("task", "depth", "width", "heads", "seed", "lr", "length",
                              "repeats", "steps", "group") if k in row}


class LiveCurves:
  """Streams each model's curves to the tracker at every checkpoint of its group (every
  `log_every` steps), so a long group shows progress before it ends."""

  def __init__(self, tracker, g, log_every=10):
    self.tracker, self.g, self.log_every, self.logged = tracker, g, log_every, 0

  def __call__(self, step, curves):
    steps = list(range(self.logged + self.log_every, step + 1, self.log_every))
    if not steps:
      return
    for m, cell in enumerate(self.g.cells):
      s = cell.spec
      conf = dict(depth=s.depth, width=s.width, heads=s.heads, seed=s.seed, lr=s.lr,
                  length=self.g.length, repeats=s.repeats, group=self.g.id)
      part = {"step": steps, **{k: v[[t - 1 for t in steps], m].tolist()
                                for k, v in curves.items()}}
      self.tracker.log_model(cell.key, conf, part, {})
    self.logged = steps[-1]


def pull(workdir, c, order, stop, exit_when_idle, poll_s):
  """The next group this worker holds a lease on, or None when every group is finished
  (or, with exit_when_idle, when the rest are held by live workers)."""
  waiting = False
  while True:
    left = [g for g in order if not os.path.exists(results.group_path(workdir, g.id))]
    if not left:
      return None
    for g in left:
      lease = Lease(workdir, g.id, c.lease_s)
      if lease.acquire():
        if os.path.exists(results.group_path(workdir, g.id)):  # finished meanwhile
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
      return None  # the rest are this process's other slots' groups: they finish them
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
  """A stop request was served in a slot (its group checkpointed, or nothing held)."""


class Locked:
  """Calls to `obj` one thread at a time (the tracker, report files, matplotlib)."""

  def __init__(self, obj):
    self._obj, self._lock = obj, threading.Lock()

  def __getattr__(self, name):
    attr = getattr(self._obj, name)
    if not callable(attr):
      return attr
    def call(*a, **k):
      with self._lock:
        return attr(*a, **k)
    return call


def _ours(record) -> bool:
  """True if a lease is held by this very process (another slot of this worker)."""
  return bool(record) and not record.get("released") and record.get("pid") == os.getpid() \
      and record.get("host") == socket.gethostname()


def run(c, workdir: str, progress: bool = True, report=True, signals=True, devices=None,
        exit_when_idle=False) -> list[dict]:
  """Pull and train groups until every group of the study is finished; returns all rows
  in the workdir. The devices are dealt into slots (slot_size) that pull groups side by
  side, one thread each. `signals=False` installs no handlers (the caller handles stops)."""
  import jax
  task, _ = planned(c)
  check_workdir(workdir)
  start_jax(c)
  c.report.scaled_by = task.scaled_by  # what the report scales (the task's own measure)
  prepare_workdir(c, workdir)
  devs = list(devices or jax.local_devices())
  groups = frozen_plan(c, workdir, task, devs)
  size = plan.slot_size(len(devs), [len(g.cells) for g in groups])
  slots = [devs[i:i + size] for i in range(0, len(devs), size)]
  stop = StopFlag().install() if signals else StopFlag()
  tracker = Locked(trackers.WandbTracker(workdir, c.name, mode=c.wandb.mode or None,
                                         project=c.wandb.project))
  wall0 = time.perf_counter()
  order = largest_first(c, task, groups)
  todo = [g for g in order if not os.path.exists(results.group_path(workdir, g.id))]
  where = (f"{len(slots)} slots of {size} devices side by side" if len(slots) > 1
           else f"{len(devs)} device(s)")
  print(f"depthscale: {len(groups)} groups, {len(todo)} to train, "
        f"{sum(len(g.cells) for g in groups)} models on {where} -> {workdir}", file=sys.stderr)
  summary = threading.Lock()
  trained = []

  def serve(slot):
    """One slot's loop: pull a group, train it on the slot's devices, write it."""
    while (got := pull(workdir, c, order, stop, exit_when_idle, min(5.0, c.lease_s / 4))):
      if train_one(c, task, workdir, *got, slot, tracker, stop, progress):
        trained.append(got[0].id)
        if report:
          with summary:
            refresh_summary(workdir, tracker)

  if len(slots) == 1:
    try:
      serve(slots[0])
    except Stopped:
      stop.hand_over()
  else:
    errors = []
    def guarded(slot):
      try:
        serve(slot)
      except BaseException as e:  # re-raised in the main thread below
        errors.append(e)
        stop.set = stop.set or not isinstance(e, Stopped)  # a bug stops the other slots
    threads = [threading.Thread(target=guarded, args=(sl,), daemon=True) for sl in slots]
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
  rows = collect(workdir)
  if trained and report:
    wall = time.perf_counter() - wall0
    print(f"depthscale: W&B ({tracker.mode}) logging took {tracker.seconds:.1f} s of "
          f"{wall:.1f} s ({100 * tracker.seconds / wall:.1f}%); report: "
          f"{os.path.join(workdir, 'report.md')}", file=sys.stderr)
  return rows


def train_one(c, task, workdir, g, lease, devs, tracker, stop, progress) -> bool:
  """Train group `g` (leased) on `devs` and write its results; False if its lease was
  lost (nothing written); raises Stopped after checkpointing on a stop request."""
  lease.start()
  ckpt = GroupCheckpoints(os.path.abspath(os.path.join(workdir, "checkpoints", g.id)))
  live = LiveCurves(tracker, g)

  def before_save(step, curves):
    lease.check()  # raises LeaseLost: nothing is saved
    live(step, curves)

  try:
    res = train_group(task, g.specs, train_config(c, g.length, g),
                      steps_per_call=c.train.steps_per_call, eval_size=c.eval.size,
                      threshold=c.eval.threshold, model=model_options(c, g),
                      probed=cached_probe(c, task, g, devs),
                      memory_limit=memory_limit(c, devs),
                      progress=progress, devices=devs,
                      desc=f"group {g.id} n={g.length}", checkpoints=ckpt,
                      checkpoint_every=c.checkpoint_every, should_stop=lambda: stop.set,
                      before_save=before_save,
                      on_progress=lambda step, rate: lease.update(step, c.train.steps, rate))
    lease.check()  # still ours: write the results
    for row, cell in zip(res.rows, g.cells):
      row.update(group=g.id, model=cell.key)
    live(c.train.steps, res.curves)
    log_group(tracker, res.rows, res)  # first: a kill before the next line re-logs
    results.write_group(workdir, g.id, res.rows, res.curves, res.per_position_acc)
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
    ckpt.close()
  print(f"depthscale: group {g.id} done", file=sys.stderr)
  return True


def refresh_summary(workdir, tracker):
  """results.csv, report.md, fits and plots of the groups finished so far, and the W&B
  summary run (its table and plots updated as groups finish)."""
  from depthscale.report import build_report  # matplotlib only when there is news
  rows = collect(workdir)
  build_report(workdir)
  with open(os.path.join(workdir, "fits.json")) as f:
    fits = json.load(f)
  plots = os.path.join(workdir, "plots")
  images = {p[:-4]: os.path.join(plots, p) for p in sorted(os.listdir(plots))
            if p.endswith(".png")} if os.path.isdir(plots) else {}
  tracker.log_summary(rows, images, fits.get("fits", {}))


def collect(workdir: str) -> list[dict]:
  rows = [r for g in results.read_groups(workdir).values() for r in g["rows"]]
  rows.sort(key=lambda r: (r["length"], r["depth"], r["repeats"], r["width"], r["lr"],
                           r["seed"]))
  results.write_results_csv(workdir, rows)
  return rows
