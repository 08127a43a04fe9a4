"""Groups -> results: run a plan in a workdir, resumably, and leave results behind.

A workdir keeps its config (config.json); a rerun with a different study is refused.
Finished groups (groups/<id>.json) are skipped; unfinished ones resume from their
latest checkpoint. SIGTERM and SIGUSR2 save a checkpoint and exit cleanly.
Imports config, sweep.grid/plan/group and io/.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import time

from depthscale import config as config_lib
from depthscale.core import train
from depthscale.io import results, trackers
from depthscale.io.claims import Claim
from depthscale.io.checkpoint import GroupCheckpoints
from depthscale.sweep import grid, plan
from depthscale.sweep.group import Interrupted, train_group

# Fields that may change between runs of one workdir without changing its results.
NON_IDENTITY = ("wandb", "plan", "checkpoint_every", "paper_fit", "name")


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


def prepare_workdir(c, workdir: str) -> None:
  """Write config.json, or refuse (one line) if the workdir holds another study."""
  path = os.path.join(workdir, "config.json")
  if os.path.exists(path):
    with open(path) as f:
      old = json.load(f)
    new = json.loads(c.to_json_best_effort())
    diff = sorted(k for k in set(identity(c)) | {k for k in old if k not in NON_IDENTITY}
                  if old.get(k) != new.get(k))
    if diff:
      raise config_lib.ConfigError(
          f"workdir {workdir} holds a different study ({', '.join(diff)} differ); "
          "use a new --workdir or rerun with the original config")
    return
  os.makedirs(workdir, exist_ok=True)
  results.write_atomic(path, c.to_json_best_effort(indent=2))


def train_config(c, length: int) -> train.TrainConfig:
  t = c.train
  return train.TrainConfig(batch_size=t.batch_size, length=length, total_steps=t.steps,
                           curriculum=t.curriculum, steps_per_stage=t.steps_per_stage,
                           advance_at=t.advance_at, decay=t.decay, clip_norm=t.clip_norm,
                           models_per_chunk=t.models_per_chunk)


class StopFlag:
  """Set by SIGTERM / SIGUSR2 while installed."""

  def __init__(self):
    self.set = False

  def __call__(self, *_):
    self.set = True

  def install(self):
    for s in (signal.SIGTERM, signal.SIGUSR2):
      signal.signal(s, self)
    return self


def planned(c):
  task = config_lib.validate(c)
  cells = grid.cells(c)
  return task, plan.make_plan(cells, c, task.seq_len, task.output_dim(max(c.grid.length)))


def log_group(tracker, rows, res, log_every=10):
  """One W&B run per model: its config fields, curves every `log_every` steps, n*."""
  steps = list(range(log_every, res.curves["loss"].shape[0] + 1, log_every))
  for m, row in enumerate(rows):
    conf = {k: row[k] for k in ("task", "depth", "width", "heads", "seed", "lr", "length",
                                "repeats", "steps", "group")}
    curves = {"step": steps, **{k: v[[s - 1 for s in steps], m].tolist()
                                for k, v in res.curves.items()}}
    summary = {k: row[k] for k in ("n_star", "k_star", "final_loss", "eval_loss", "seq_acc",
                                   "frozen") if k in row}
    tracker.log_model(row["model"], conf, curves, summary)


def share(c, task, groups, index: int, count: int):
  """This worker's groups when `count` workers split the plan (balanced by cost)."""
  if count <= 1:
    return groups
  cost = plan.cost_fn(task, c, task.output_dim(max(c.grid.length)))
  return plan.assign(groups, count, cost)[index]


def run(c, workdir: str, progress: bool = True, worker=(0, 1), report=True,
        signals=True) -> list[dict]:
  """Train every group of this worker's share not yet finished (worker = (index, count):
  processes or array tasks splitting the plan); returns all rows in the workdir.
  `signals=False` leaves SIGTERM/SIGUSR2 to a host such as submitit (which requeues)."""
  task, groups = planned(c)
  reproducible_xla()
  if c.model.dtype == "float64":
    import jax
    jax.config.update("jax_enable_x64", True)
  groups = share(c, task, groups, *worker)
  prepare_workdir(c, workdir)
  stop = StopFlag().install() if signals else StopFlag()
  tracker = trackers.WandbTracker(workdir, c.name, mode=c.wandb.mode or None,
                                  project=c.wandb.project)
  wall0 = time.perf_counter()
  todo = [g for g in groups if not os.path.exists(results.group_path(workdir, g.id))]
  print(f"depthscale: {len(groups)} groups, {len(todo)} to train, "
        f"{sum(len(g.cells) for g in groups)} models -> {workdir}", file=sys.stderr)
  for i, g in enumerate(todo):
    claim = Claim(workdir, g.id)
    if not claim.acquire():
      print(f"depthscale: group {g.id} is being trained by another launch; skipped",
            file=sys.stderr)
      continue
    if os.path.exists(results.group_path(workdir, g.id)):  # finished by another launch
      claim.release()
      continue
    ckpt = GroupCheckpoints(os.path.abspath(os.path.join(workdir, "checkpoints", g.id)))
    try:
      res = train_group(task, g.specs, train_config(c, g.length),
                        steps_per_call=c.train.steps_per_call, eval_size=c.eval.size,
                        threshold=c.eval.threshold, pos=c.model.pos,
                        mlp_ratio=c.model.mlp_ratio, dtype=c.model.dtype,
                        progress=progress,
                        desc=f"group {i + 1}/{len(todo)} n={g.length}", checkpoints=ckpt,
                        checkpoint_every=c.checkpoint_every, should_stop=lambda: stop.set)
    except Interrupted as e:
      print(f"depthscale: stopped; checkpoint of group {g.id} saved at step {e.step}. "
            "Rerun the same command to resume.", file=sys.stderr)
      raise SystemExit(0)
    finally:
      ckpt.close()
    for row, cell in zip(res.rows, g.cells):
      row.update(group=g.id, model=cell.key)
    log_group(tracker, res.rows, res)  # first: a kill before the next line re-logs
    results.write_group(workdir, g.id, res.rows, res.curves, res.per_position_acc)
    claim.release()
    print(f"depthscale: group {g.id} done", file=sys.stderr)
  rows = collect(workdir)
  if todo and report:
    from depthscale.report import build_report  # matplotlib only when there is news
    report = build_report(workdir)
    with open(os.path.join(workdir, "fits.json")) as f:
      fits = json.load(f)
    plots = os.path.join(workdir, "plots")
    images = {p[:-4]: os.path.join(plots, p) for p in sorted(os.listdir(plots))
              if p.endswith(".png")} if os.path.isdir(plots) else {}
    tracker.log_summary(rows, images, fits.get("fits", {}))
    wall = time.perf_counter() - wall0
    print(f"depthscale: W&B ({tracker.mode}) logging took {tracker.seconds:.1f} s of "
          f"{wall:.1f} s ({100 * tracker.seconds / wall:.1f}%); report: {report}",
          file=sys.stderr)
  return rows


def collect(workdir: str) -> list[dict]:
  rows = [r for g in results.read_groups(workdir).values() for r in g["rows"]]
  rows.sort(key=lambda r: (r["length"], r["depth"], r["repeats"], r["width"], r["lr"],
                           r["seed"]))
  results.write_results_csv(workdir, rows)
  return rows
