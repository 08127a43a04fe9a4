"""A study config resolved once: resolve(config) -> Study.

Everything downstream (plan, probe, estimate, runner, status) takes the Study and reads
the derived values here: the task, the cells, output size and vocabulary, each group's
TrainConfig and model options, the dtype a device's peak is read in, the JAX settings.
The workdir's identity (a rerun with another study is refused) is decided here too.
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys

import ml_collections

from depthscale import config as config_lib
from depthscale import tasks
from depthscale.core import halving, program, stopping, train
from depthscale.io import places, workdir as workdir_lib
from depthscale.sweep import grid, plan, probe, resize
from depthscale.sweep.group_options import RunOptions

# Fields that may change between runs of one workdir without changing its results. The
# plan is not among them: its grouping decides which group file holds which model.
NON_IDENTITY = ("wandb", "checkpoint_every", "paper_fit", "name", "lease_s", "report",
                "task_digest")  # a changed task is refused on its own (claim_workdir)


@dataclasses.dataclass(frozen=True)
class Study:
  """A validated config and what is derived from it, computed once."""
  config: ml_collections.ConfigDict   # the raw fields, read as they are
  task: object
  cells: tuple                        # grid.Cell, in the grid's stable order
  output_dim: int                     # the task's output size at the longest length
  vocab: int                          # input vocabulary (0: continuous inputs)
  peak_dtype: str                     # the dtype a device's matmul peak is read in

  @property
  def name(self) -> str:
    return self.config.name

  def seq_len(self, length: int) -> int:
    return self.task.seq_len(length)

  def train_config(self, g=None, length: int | None = None) -> train.TrainConfig:
    """Group `g`'s TrainConfig (at its length, or `length`): the memory fit's
    models_per_chunk (if any) wins; the plan's layout (pad or compact)."""
    t = self.config.train
    length = length or (g.length if g is not None else max(self.config.grid.length))
    return train.TrainConfig(
        batch_size=t.batch_size, length=length, total_steps=t.steps,
        curriculum=t.curriculum, steps_per_stage=t.steps_per_stage, advance_at=t.advance_at,
        length_max=t.length_max if t.length_max > length else 0, buckets=t.length_buckets,
        decay=t.decay, clip_norm=t.clip_norm,
        models_per_chunk=(g and g.models_per_chunk) or t.models_per_chunk,
        layout=g.layout if g is not None else "pad")

  def program(self, g=None, length: int | None = None) -> program.Blueprint:
    """Group `g`'s program as a value (core/program.Blueprint): the task, its models, its
    TrainConfig and model options, steps_per_call; what the builder, the probe (its cache
    key), the memory fit and the worker take."""
    return program.Blueprint.of(self.task, g.specs if g is not None else (),
                                self.train_config(g, length), self.model_options(g),
                                self.config.train.steps_per_call)

  def run_options(self, g, devs) -> RunOptions:
    """How group `g` trains on `devs` beyond its program (sweep/group_run.RunOptions): the
    held-out evaluation, checkpoints, the stopping rule and slots, a rebuild's cost in
    program steps (the planner's model, so every rerun decides alike) and memory limit."""
    c = self.config
    step_s = plan.step_seconds(self, g, probe.flops_per_s(self, devs), c.train.slots)
    return RunOptions(eval_size=c.eval.size, threshold=c.eval.threshold,
                      checkpoint_every=c.checkpoint_every, stop=self.stop_rule(),
                      slots=c.train.slots, memory_limit=probe.memory_limit(self, devs),
                      rebuild_steps=resize.compile_steps(c.train.rebuild, c.train.rebuild_steps,
                                                         c.plan.compile_s, step_s))

  def stop_rule(self) -> stopping.Rule:
    """The study's stopping rule (train.stop), evaluated every stop_every steps (0: every
    steps_per_call)."""
    t = self.config.train
    return stopping.Rule(kind=t.stop, every=t.stop_every or t.steps_per_call,
                         patience=t.patience, threshold=self.config.eval.threshold,
                         eta=t.get("eta", 3))

  def group_steps(self, g) -> int:
    """Group g's program steps at most: the budget, times the rounds of a queue (slots
    fewer than models); stopping rules end it sooner."""
    t, n = self.config.train, len(g.cells)
    slots = t.slots
    if t.stop == "halving":  # one slot per scout (core/halving.py)
      slots = len(halving.Ladder([x.spec for x in g.cells], t.get("eta", 3), t.steps,
                                 t.stop_every or t.steps_per_call).scouts)
    return t.steps * (-(-n // slots) if 0 < slots < n else 1)

  def model_options(self, g=None) -> dict:
    """The ModelConfig fields every model of group `g` shares; the memory fit's remat
    (if any) wins."""
    m = self.config.model
    return dict(pos=m.pos, mlp_ratio=m.mlp_ratio, dtype=m.dtype, compute_dtype=m.compute_dtype,
                attention=m.attention, remat=(g and g.remat) or m.remat, unroll=m.unroll,
                gelu=m.gelu)

  def start_jax(self) -> None:
    """JAX settings every program of the study is compiled under (run and plan alike)."""
    split_cpu(self.config.plan.cpu_devices)
    reproducible_xla()
    if self.config.model.dtype == "float64":
      import jax
      jax.config.update("jax_enable_x64", True)
    start_backend()


def start_backend() -> None:
  """JAX's backend started now, or one line if the platform asked for (JAX_PLATFORMS) is
  absent here: jax ends that with a bare AssertionError from inside its bridge."""
  import jax
  try:
    jax.devices()
  except (RuntimeError, AssertionError) as e:
    asked = os.environ.get("JAX_PLATFORMS")
    if not asked:
      raise
    why = " ".join(str(e).split())[:200] or "no backend started"
    raise config_lib.ConfigError(
        f"JAX_PLATFORMS={asked}: JAX cannot start that platform here ({type(e).__name__}: "
        f"{why}); unset JAX_PLATFORMS, set it to cpu, or install jax for that accelerator "
        "(README: On a GPU or TPU)") from None


def resolve(c: ml_collections.ConfigDict) -> Study:
  """The Study of config `c`: validated (one-line ConfigError first), then derived once.
  Sets c.report.scaled_by to the task's own measure (what the report scales)."""
  task = config_lib.validate(c)
  c.report.scaled_by = task.scaled_by
  study = Study(config=c, task=task, cells=tuple(grid.cells(c)),
                output_dim=task.output_dim(max(c.grid.length)), vocab=task.input_vocab or 0,
                peak_dtype="bfloat16" if c.model.compute_dtype == "bfloat16" else "float32")
  plan.make_plan(study)  # a one-line ConfigError now if one model exceeds device_memory_gb
  return study


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


COUNT_FLAG = "--xla_force_host_platform_device_count"


def split_cpu(count: int) -> None:
  """Split JAX's CPU platform into `count` devices (0: leave it as it is): XLA_FLAGS gets
  the count before JAX starts its backends. Where that is too late (JAX already started,
  as in a test process or a companion run) or XLA_FLAGS names another count, the devices
  JAX has are used and a line says so. Accelerators are untouched."""
  import jax
  from jax._src import xla_bridge
  if not count:
    return
  flags = os.environ.get("XLA_FLAGS", "")
  if COUNT_FLAG not in flags and not xla_bridge.backends_are_initialized():
    os.environ["XLA_FLAGS"] = f"{flags} {COUNT_FLAG}={count}".strip()
    return
  have = jax.local_devices(backend="cpu")
  if len(have) != count and jax.default_backend() == "cpu":
    print(f"depthscale: plan.cpu_devices={count} not applied: JAX has {len(have)} CPU "
          f"device(s) (XLA_FLAGS or an earlier start); training on those", file=sys.stderr)


# The model options that say how the one model is computed, not which model: the memory
# fit changes remat per group as it is; a rerun may choose other kernels.
HOW_COMPUTED = ("attention", "remat", "unroll", "gelu")
TRAIN_HOW_COMPUTED = ("length_buckets",)  # the same batches, cut: a step's positions


def identity(c) -> dict:
  """The fields that decide a workdir's results (all but NON_IDENTITY and HOW_COMPUTED)."""
  return _comparable(json.loads(c.to_json_best_effort()))


def _comparable(d: dict) -> dict:
  out = {k: v for k, v in d.items() if k not in NON_IDENTITY}
  if isinstance(out.get("model"), dict):
    out["model"] = {k: v for k, v in out["model"].items() if k not in HOW_COMPUTED}
  if isinstance(out.get("train"), dict):
    out["train"] = {k: v for k, v in out["train"].items() if k not in TRAIN_HOW_COMPUTED}
  if isinstance(out.get("design"), dict) and out["design"].get("kind", "grid") == "grid":
    out["design"] = {"kind": "grid"}  # a grid trains the same models whatever the rule's
  return out


def claim_workdir(study: Study, workdir: str, write: bool = True) -> None:
  """Write the workdir's config.json, or refuse (one line) if it holds another study or
  its models trained on another version of the task. A rerun of the same study with other
  claims (the `report` section) updates config.json. `write=False`: the checks only."""
  c = study.config
  with c.unlocked():
    c.task_digest = tasks.digest(c.task)
  saved = workdir_lib.read_config(workdir)
  if saved is None:
    if write:
      workdir_lib.write_config(workdir, c.to_json_best_effort(indent=2))
    return
  old = json.loads(saved_config(workdir, saved).to_json_best_effort())
  was, now = _comparable(old), identity(c)
  diff = sorted(k for k in set(now) | set(was) if was.get(k) != now.get(k))
  if diff:
    raise config_lib.ConfigError(
        f"workdir {workdir} holds a different study ({', '.join(diff)} differ); "
        "use a new --workdir or rerun with the original config")
  _check_task_unchanged(workdir, old.get("task_digest") or "", c)
  new = json.loads(c.to_json_best_effort())
  if write and (old.get("report") != new.get("report")
                or old.get("task_digest") != c.task_digest):
    workdir_lib.write_config(workdir, c.to_json_best_effort(indent=2))  # claims, a digest


def _check_task_unchanged(workdir: str, recorded: str, c) -> None:
  """A task whose source changed since the workdir's models were trained on it is refused:
  resuming would train one model on two tasks. A workdir with nothing trained yet (or
  made before digests were recorded) takes the current digest; one that recorded a
  package task's module file alone (before sha256-pkg) is held to that file."""
  if not recorded or recorded == c.task_digest or not workdir_lib.has_training(workdir):
    return
  if c.task_digest.startswith("sha256-pkg:") and recorded == tasks.digest(c.task, True):
    return  # recorded before packages were covered: the module's own file is unchanged
  where = c.task.rpartition(":")[0] if ":" in c.task else c.task
  raise config_lib.ConfigError(
      f"task {where} changed since workdir {workdir} trained on it ({recorded[:19]}..., now "
      f"{c.task_digest[:19] or 'none'}...); restore it, or use a new --workdir")


def load_saved(workdir: str) -> Study:
  """The Study of a workdir's config.json (fields added since: their defaults)."""
  saved = workdir_lib.read_config(workdir)
  if saved is None:
    places.check_exists(workdir)  # a file, a missing path: said as such
  if saved is None:
    raise config_lib.ConfigError(f"{workdir!r} is not a depthscale workdir (no config.json); "
                                 "give the --workdir of a run")
  return resolve(saved_config(workdir, saved))


def saved_config(workdir: str, saved: dict) -> ml_collections.ConfigDict:
  """config.json over the defaults (fields added since the workdir was made: their
  defaults); a one-line ConfigError if it is not a study this version can read."""
  c = config_lib.defaults()
  try:
    with c.unlocked():
      c.update(ml_collections.ConfigDict(saved))
  except (TypeError, ValueError, AttributeError, KeyError) as e:
    raise config_lib.ConfigError(f"{workdir}/config.json is not a study this version of "
                                 f"depthscale reads ({' '.join(str(e).split())}); restore "
                                 "it, or use a new --workdir") from None
  config_lib.check_fields(c, config_lib.defaults(), f"{workdir}/config.json")
  if isinstance(c.task, str):  # as config.load stores it now (a `~` expanded, normalised)
    config_lib.anchor_task_file(c, os.path.abspath(workdir))
  return c
