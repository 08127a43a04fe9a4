"""One group's program: fill, arrange, build, shard and compile its K-step train function.

`build` is the one builder, of a Blueprint (the program as a value): sweep/group_run.py
trains with it, sweep/probe.py times it and depthscale/bench measures it, so the plan
prices exactly the program that trains. One model's step (core/train.py) is vmapped over
M here (pad) or run through model/compact, chunked (lax.map) and scanned or looped.
"""
from __future__ import annotations

import dataclasses
import hashlib
import time

import jax
import jax.numpy as jnp
import numpy as np

from depthscale.core import compiled, ensemble, lengths, metrics, train
from depthscale.core.chunks import by_chunk, chunk_size, local_chunk, map_models
from depthscale.model import ModelConfig, compact


def arrange(specs, tcfg: train.TrainConfig, n_devices: int = 1):
  """(order, tcfg) of a group's program: for layout compact, the specs' indices in
  program order (deepest first, dealt over the devices) and tcfg with the static
  profile of every device's (and chunk's) models; (None, tcfg) for pad."""
  if tcfg.layout == "pad":
    return None, tcfg
  if tcfg.layout not in train.LAYOUTS:
    raise ValueError(f"unknown layout {tcfg.layout!r}")
  if len(specs) % n_devices:
    raise ValueError(f"{len(specs)} models do not divide over {n_devices} devices")
  shapes = [(s.depth, s.repeats) for s in specs]
  m = len(specs) // n_devices
  lanes = n_devices * (m // chunk_size(m, local_chunk(tcfg.models_per_chunk, n_devices)))
  return (compact.order(shapes, n_devices),
          dataclasses.replace(tcfg, profile=compact.profile(shapes, lanes)))


def group_step(task, cfg: ModelConfig, tcfg: train.TrainConfig, devices=None):
  """The step of all M models: (state_M, hparams_M, arch_M) -> (state_M, metrics {name:
  [M]}). pad: the one-model step vmapped once (its chunks, if any, run outside the loop
  over steps: by_chunk). compact: make_compact_step, on each device's block of models
  (shard_map over `devices` when more than one), chunk by chunk at each step; at the
  length bucket of its models' furthest stage (core/lengths.py)."""
  if tcfg.layout == "pad":  # the one vmap over models
    return lengths.at_bucket(task, tcfg, lambda t: jax.vmap(_one_step(task, cfg, tcfg, t)))
  if not tcfg.profile:
    raise ValueError("a compact layout needs its profile: see arrange")
  n = len(devices) if devices else 1
  step_M = lengths.at_bucket(task, tcfg, lambda t: map_models(
      train.make_compact_step(task, cfg, tcfg, t), local_chunk(tcfg.models_per_chunk, n)))
  if n == 1:
    return step_M
  by_model = jax.sharding.PartitionSpec("models")
  mesh = jax.sharding.Mesh(np.asarray(devices), ("models",))
  # check_vma=False: each device's models are independent (no collective in the step), and
  # with the check on, a task's scan whose carry starts from a constant (khop's hop loop, a
  # user's sampler) fails to trace: its carry turns "varying over models" in the body.
  return jax.shard_map(step_M, mesh=mesh, in_specs=(by_model,) * 3,
                       out_specs=(by_model, by_model), check_vma=False)


def chunk_fn(task, cfg: ModelConfig, tcfg: train.TrainConfig, steps_per_call: int, devices=None):
  """`steps_per_call` steps of all M models: (state_M, hparams_M, arch_M) ->
  (state_M, metrics {name: [K, M]}). Un-jitted; see make_train_chunk."""
  step_M = group_step(task, cfg, tcfg, devices)

  def chunk(state_M, hp_M, arch_M):
    return jax.lax.scan(lambda s, _: step_M(s, hp_M, arch_M), state_M, None,
                        length=steps_per_call)

  return by_chunk(chunk, tcfg)


def _one_step(task, cfg: ModelConfig, tcfg: train.TrainConfig, positions):
  """One model's step, jitted inline (its operations land in the program as if it were
  not jitted: the same program text) and kept: a queue's programs rebuilt with fewer
  slots vmap the trace they share instead of tracing the model again."""
  return compiled.kept_step(
      _key("one_step", task, cfg, tcfg, positions, None),  # positions in the steps place
      lambda: jax.jit(train.make_step(task, cfg, tcfg, positions), inline=True))


def make_train_chunk(task, cfg: ModelConfig, tcfg: train.TrainConfig, steps_per_call: int,
                     devices=None):
  """chunk_fn jitted, state donated (a dispatch runs K steps of M models); kept, as below."""
  return compiled.kept_function(
      _key("chunk", task, cfg, tcfg, steps_per_call, devices),
      lambda: jax.jit(chunk_fn(task, cfg, tcfg, steps_per_call, devices), donate_argnums=0))


def make_train_steps(task, cfg: ModelConfig, tcfg: train.TrainConfig, max_steps: int,
                     devices=None):
  """make_train_chunk with the step count as data: (state_M, hparams_M, arch_M, n) runs
  n <= max_steps steps (a while loop), metrics {name: [max_steps, M]} filled for the
  first n. One program serves every n: dispatches sized by time serve a stop request
  within one. `devices`: the models axis's (a compacted step runs per device). Kept per
  equal arguments (compiled.kept_function): built again, it is not traced again."""
  return compiled.kept_function(_key("steps", task, cfg, tcfg, max_steps, devices),
                                lambda: _train_steps(task, cfg, tcfg, max_steps, devices))


def _key(kind, task, cfg, tcfg, steps, devices) -> tuple:  # the class: a file loaded again
  return (kind, type(task), metrics.task_id(task), cfg, tcfg, steps, tuple(devices or ()))


def _train_steps(task, cfg, tcfg, max_steps, devices):
  # jitted inline: the shape pass below and the loop's body share one trace of the step,
  # and the loop holds the step's operations as if it were not jitted
  step_M = jax.jit(group_step(task, cfg, tcfg, devices), inline=True)

  def loop(state_M, hp_M, arch_M, n):
    _, like = jax.eval_shape(step_M, state_M, hp_M, arch_M)
    buf = jax.tree.map(lambda s: jnp.zeros((max_steps,) + s.shape, s.dtype), like)

    def body(i, carry):
      state, buf = carry
      state, met = step_M(state, hp_M, arch_M)
      return state, jax.tree.map(lambda b, x: b.at[i].set(x), buf, met)

    return jax.lax.fori_loop(0, n, body, (state_M, buf))

  def run(state_M, hp_M, arch_M, n):
    return by_chunk(lambda s, h, a: loop(s, h, a, n), tcfg)(state_M, hp_M, arch_M)

  return jax.jit(run, donate_argnums=0)


def model_config(task, specs, tcfg: train.TrainConfig,
                 model_options: dict | None = None) -> ModelConfig:
  """The group's static ModelConfig: the specs' padded shape, the task's sizes and the
  study's shared model options (ModelConfig fields: pos, mlp_ratio, dtype, compute_dtype,
  attention, remat)."""
  return ensemble.group_config(specs, max_len=task.seq_len(tcfg.full_length),
                               output_dim=task.output_dim(tcfg.full_length),
                               vocab=task.input_vocab, input_dim=task.input_dim,
                               **(model_options or {}))


def fill(specs, n_devices: int):
  """Specs padded with copies of the last one so that M divides over the devices (the
  copies' results are dropped); models never talk to each other, so no collectives."""
  extra = -len(specs) % n_devices
  return list(specs) + [specs[-1]] * extra


def in_order(specs, order):
  """The specs in program order (`order` from arrange; None: as given)."""
  return list(specs) if order is None else [specs[i] for i in order]


def take(tree, index, axis: int = 0):
  """Host copies of every leaf with its models axis reordered by `index` (None: as is)."""
  if index is None:
    return tree
  return jax.tree.map(lambda x: np.take(np.asarray(x), index, axis=axis), tree)


def real_models(tree, n_real: int, axis: int = 0):
  """The first n_real models of every leaf (what checkpoints hold: no filler copies)."""
  return jax.tree.map(lambda x: x[(slice(None),) * axis + (slice(0, n_real),)], tree)


def refill(tree, m: int, axis: int = 0):
  """Leaves with n_real models along `axis`, filled up to m with copies of the last one:
  the state the filler copies would have had, since they train exactly as that model."""
  def one(x):
    x = np.asarray(x)
    last = np.take(x, [x.shape[axis] - 1], axis=axis)
    return np.concatenate([x] + [last] * (m - x.shape[axis]), axis=axis)
  return jax.tree.map(one, tree)


def shard_models(tree, devices):
  """Every leaf's leading models axis split over `devices` (a 1-D mesh named 'models');
  as it is on one device."""
  if len(devices) < 2:
    return tree
  mesh = jax.sharding.Mesh(np.asarray(devices), ("models",))
  return jax.device_put(tree, jax.sharding.NamedSharding(mesh,
                                                         jax.sharding.PartitionSpec("models")))


def init_inputs(specs, cfg: ModelConfig, tcfg: train.TrainConfig, devices):
  """(state, hparams, arch) of `specs` (in program order) at `cfg`'s padded shape, with
  the models axis sharded over `devices`."""
  state = train.init_state(ensemble.init_params(specs, cfg), tcfg)
  return shard_models((state, train.stack_hparams(specs), ensemble.stack_arch(specs, cfg)),
                      devices)


@dataclasses.dataclass
class Program:
  """A group's compiled program and its inputs. `specs` are in program order (filled to
  divide over the devices); `order[i]` is the spec index of program slot i (None: as
  given); `run(state, hp, arch, n)` trains n <= steps_per_call steps (state donated)."""
  cfg: ModelConfig
  tcfg: train.TrainConfig          # arranged (a compact group's profile set)
  specs: list
  order: np.ndarray | None
  devices: list
  state: train.State
  hp: train.Hparams
  arch: object
  run: object
  compile_s: float                 # spent by this build (about 0 for a kept executable)
  compile_cost_s: float            # what compiling the program costs (core/compiled.py)
  memory_bytes: int
  fingerprint: str                 # of the lowered program (StableHLO text)

  @property
  def back(self):
    """Program order -> spec order (None: the same)."""
    return None if self.order is None else np.argsort(self.order)


@dataclasses.dataclass(frozen=True)
class Blueprint:
  """What a group's program is compiled from, as one value: the task, the models (in spec
  order), the train config, the shared model options (ModelConfig fields) and the steps
  one dispatch may run. `cover`: the models its padded shape must hold (empty: `models`;
  a group with a queue starts with some of its models and takes the others into the same
  slots later). Seeds and learning rates are data: `signature` leaves them out."""
  task: object
  models: tuple
  tcfg: train.TrainConfig
  options: tuple = ()              # sorted (name, value) pairs of the model options
  steps_per_call: int = 100
  cover: tuple = ()

  @classmethod
  def of(cls, task, models, tcfg: train.TrainConfig, model_options: dict | None = None,
         steps_per_call: int = 100) -> "Blueprint":
    return cls(task=task, models=tuple(models), tcfg=tcfg,
               options=tuple(sorted((model_options or {}).items())),
               steps_per_call=steps_per_call)

  @property
  def model_options(self) -> dict:
    return dict(self.options)

  def subset(self, index) -> "Blueprint":
    """The program of models[index] at this blueprint's padded shape (its cover)."""
    return dataclasses.replace(self, models=tuple(self.models[i] for i in index),
                               cover=self.cover or self.models)

  def config(self) -> ModelConfig:
    """The static ModelConfig of the program (the models' padded shape, at cover's)."""
    return model_config(self.task, list(self.cover or self.models), self.tcfg,
                        self.model_options)

  def signature(self, devices) -> str:
    """The program's identity: everything it is compiled from (the task, the padded
    shape, the train config, M, the model options) and the device kind and count; the
    probe's cache key."""
    cfg = model_config(self.task, list(self.models), self.tcfg, self.model_options)
    shapes = sorted(s.shape() for s in self.models)
    text = repr((metrics.task_id(self.task), cfg, dataclasses.astuple(self.tcfg),
                 len(self.models), shapes, self.steps_per_call, devices[0].device_kind,
                 len(devices), jax.__version__))
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def build(bp: Blueprint, devices=None) -> Program:
  """The program of blueprint `bp` on `devices` (all local devices by default): its
  models filled to divide over them, arranged (compact: deepest first), initialised,
  sharded on the models axis, lowered and compiled (make_train_steps with
  max_steps=steps_per_call)."""
  devices = list(devices or jax.local_devices())
  specs = fill(list(bp.models), len(devices))
  order, tcfg = arrange(specs, bp.tcfg, len(devices))
  specs = in_order(specs, order)
  cfg = model_config(bp.task, list(bp.cover or bp.models) + specs, tcfg, bp.model_options)
  state, hp, arch = init_inputs(specs, cfg, tcfg, devices)
  t0 = time.perf_counter()
  lowered = make_train_steps(bp.task, cfg, tcfg, bp.steps_per_call, devices).lower(
      state, hp, arch, np.int32(1))
  lower_s = time.perf_counter() - t0
  c = compiled.compile_lowered(lowered, devices, lower_s)
  return Program(cfg=cfg, tcfg=tcfg, specs=specs,
                 order=None if order is None else np.asarray(order), devices=devices,
                 state=state, hp=hp, arch=arch, run=c.executable, compile_s=lower_s + c.spent_s,
                 compile_cost_s=c.compile_cost_s,
                 memory_bytes=compiled.memory_bytes(c.executable), fingerprint=c.fingerprint)
