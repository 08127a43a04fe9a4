"""The train step, written for one model (core/program.py vmaps it once over M and loops
it over steps).

Batches are sampled on device from (model's data key, step), so a restarted run sees
the same batches. Per-model hyperparameters are data: changing them never recompiles.
A model whose loss or gradients turn non-finite is frozen; the others are untouched.
"""
from __future__ import annotations

import dataclasses
import functools

import flax.struct
import jax
import jax.numpy as jnp
import optax

from depthscale.core import compiled, ensemble
from depthscale.model import Arch, ModelConfig, Transformer, compact


CURRICULA = ("none", "fixed", "adaptive")  # train.curriculum: how a model's length grows
                                          # (TrainConfig.stages, the update's stage)
LAYOUTS = ("pad", "compact")  # TrainConfig.layout (program.arrange, program.group_step)


@dataclasses.dataclass(frozen=True)
class TrainConfig:
  """What every model of a group shares (static: part of the compiled program)."""
  batch_size: int
  length: int                      # the task's size parameter at the end of curriculum
  total_steps: int
  curriculum: str = "none"         # none | fixed | adaptive
  steps_per_stage: int = 0         # fixed: steps at each curriculum length
  advance_at: float = 0.95         # adaptive: batch accuracy that moves a model on
  decay: str = "constant"          # constant | linear | cosine (after warm-up)
  b1: float = 0.9
  b2: float = 0.999
  clip_norm: float = 1.0           # 0 disables global-norm clipping
  models_per_chunk: int = 0        # >0: run the vmapped step on this many models at a time
                                   # (lax.map over chunks; same results, less live memory)
  layout: str = "pad"              # pad: every model runs the deepest model's layers (masked)
                                   # compact: each layer only on the models that have it
  profile: tuple = ()              # compact: static counts[r][t] (model/compact.py), set by
                                   # program.arrange with the models' order; () for pad
  length_max: int = 0              # >length: a model that solves its last length grows
                                   # (2x, 4x, ... the length, then length_max); 0: no growth
  buckets: bool = True             # each step runs at the length bucket its models' stages
                                   # need (core/lengths.py); False: always the full length

  @property
  def full_length(self) -> int:
    """The longest length any model may train at: where batches are sampled (then cut to
    the step's bucket) and what position tables are sized for."""
    return max(self.length, self.length_max)

  def grid_stages(self) -> tuple[int, ...]:
    """Curriculum lengths 2, 4, 8, ... up to `length` (just `length` if none)."""
    if self.curriculum == "none":
      return (self.length,)
    out, n = [], 2
    while n < self.length:
      out.append(n)
      n *= 2
    return tuple(out) + (self.length,)

  def stages(self) -> tuple[int, ...]:
    """grid_stages, then the growth lengths 2x, 4x, ... the length below length_max, and
    length_max (none without growth)."""
    out, n = list(self.grid_stages()), 2 * self.length
    while self.length_max > self.length and n < self.length_max:
      out.append(n)
      n *= 2
    return tuple(out) + ((self.length_max,) if self.length_max > self.length else ())


@flax.struct.dataclass
class Hparams:
  """Per-model hyperparameters, as arrays (stacked [M] by `stack_hparams`)."""
  lr: jax.Array
  weight_decay: jax.Array
  warmup: jax.Array
  data_key: jax.Array


@flax.struct.dataclass
class State:
  """Everything one model carries from step to step (stacked [M] in a group)."""
  params: dict
  opt_state: optax.OptState
  step: jax.Array
  stage: jax.Array
  frozen: jax.Array


def stack_hparams(specs) -> Hparams:
  f32 = jnp.float32
  return Hparams(lr=jnp.asarray([s.lr for s in specs], f32),
                 weight_decay=jnp.asarray([s.weight_decay for s in specs], f32),
                 warmup=jnp.asarray([s.warmup for s in specs], f32),
                 data_key=jnp.stack([ensemble.data_key(s.seed) for s in specs]))


# Parameters decayed by role (their name in the tree), never by rank: in the scanned
# layer stack every LayerNorm scale and bias is [depth, D], a matrix by shape only.
DECAYED_ROLES = ("kernel", "embedding", "pos")  # dense/attention kernels, token embedding,
                                                # learned positional table


def decay_mask(params):
  """True for the leaves weight decay applies to: matrices by role (DECAYED_ROLES);
  LayerNorm scales and biases and every bias are not decayed."""
  def decayed(path, _):
    name = path[-1]
    return getattr(name, "key", getattr(name, "name", None)) in DECAYED_ROLES
  return jax.tree_util.tree_map_with_path(decayed, params)


def optimizer(tcfg: TrainConfig) -> optax.GradientTransformation:
  """AdamW (decay on matrices only, by role: decay_mask) with learning rate and decay
  injected per step."""
  adamw = optax.inject_hyperparams(optax.adamw, static_args=("mask",))(
      learning_rate=0.0, weight_decay=0.0, b1=tcfg.b1, b2=tcfg.b2, mask=decay_mask)
  if tcfg.clip_norm > 0:
    return optax.chain(optax.clip_by_global_norm(tcfg.clip_norm), adamw)
  return adamw


def init_state(params_M, tcfg: TrainConfig) -> State:
  """The training state at step 0 of params [M, ...]: one compiled program per (shapes,
  tcfg), not an op per optimizer leaf (zeros and constants: the same bits either way)."""
  return compiled.bounded(_init_state)(params_M, tcfg)


@functools.partial(jax.jit, static_argnums=1)
def _init_state(params_M, tcfg: TrainConfig) -> State:
  m = jax.tree.leaves(params_M)[0].shape[0]
  opt_state = jax.vmap(optimizer(tcfg).init)(params_M)
  return State(params=params_M, opt_state=opt_state, step=jnp.zeros((m,), jnp.int32),
               stage=jnp.zeros((m,), jnp.int32),
               frozen=jnp.zeros((m,), bool))


DECAYS = ("constant", "linear", "cosine")  # train.decay: the factor after warm-up (below)


def learning_rate(hp: Hparams, step, tcfg: TrainConfig):
  """Linear warm-up to hp.lr, then constant, linear or cosine decay to 0."""
  s = step.astype(jnp.float32)
  warm = jnp.where(hp.warmup > 0, jnp.minimum(1.0, (s + 1) / jnp.maximum(hp.warmup, 1)), 1.0)
  frac = jnp.clip((s - hp.warmup) / jnp.maximum(tcfg.total_steps - hp.warmup, 1), 0.0, 1.0)
  # every factor is traced (the lowered program, hence its fingerprint, is as it always was)
  decay = dict(zip(DECAYS, (1.0, 1.0 - frac, 0.5 * (1 + jnp.cos(jnp.pi * frac)))))[tcfg.decay]
  return hp.lr * warm * decay


def set_hyperparams(opt_state, lr, wd):
  """Write this step's learning rate and weight decay into the injected-hparams state."""
  def fix(s):
    if hasattr(s, "hyperparams"):
      return s._replace(hyperparams=dict(s.hyperparams, learning_rate=lr, weight_decay=wd))
    return s
  is_inject = lambda s: hasattr(s, "hyperparams")
  return jax.tree.map(fix, opt_state, is_leaf=is_inject)


def per_token_loss(outputs, targets, loss: str):
  """Loss and correctness per position ([B, T] each); MSE averages over features."""
  if loss == "xent":
    lp = optax.softmax_cross_entropy_with_integer_labels(outputs, targets)
    return lp, (jnp.argmax(outputs, -1) == targets).astype(jnp.float32)
  err = jnp.mean(jnp.square(outputs - targets), -1)
  return err, (err < 0.1).astype(jnp.float32)


def _step_parts(task, tcfg: TrainConfig, positions: int | None = None):
  """The per-model pieces of a step at `positions` (a bucket; None: the full length),
  shared by both layouts: `prepare` (state, hp) -> (batch, active_T); `loss_of`
  (outputs, batch, active_T) -> (loss, (accuracy, the task's own measures)); `update`
  (state, hp, grads, loss, acc, own) -> (state, metrics). Each is for ONE model. Batches
  are sampled at the full length and cut to the bucket: the same data at every bucket."""
  tx = optimizer(tcfg)
  stages = tcfg.stages()
  stage_pos = jnp.asarray([task.seq_len(n) for n in stages], jnp.int32)
  t = positions or task.seq_len(tcfg.full_length)
  grows = tcfg.length_max > tcfg.length
  grid_last = len(tcfg.grid_stages()) - 1

  def prepare(state: State, hp: Hparams):
    batch = task.sample(jax.random.fold_in(hp.data_key, state.step), tcfg.batch_size,
                        tcfg.full_length)
    return batch.prefix(t), jnp.arange(t) < stage_pos[state.stage]

  def loss_of(out, batch, active_T):
    loss_BxT, correct_BxT = per_token_loss(out, batch.targets, task.loss)
    counted_BxT = batch.mask & active_T[None]
    mask_BxT = counted_BxT.astype(jnp.float32)
    count = jnp.maximum(mask_BxT.sum(), 1.0)
    own = task.measures(out, batch.replace(mask=counted_BxT))  # the task's own, e.g. partials
    if grows:  # growth needs every counted position solved: the batch's worst position
      per_T = (correct_BxT * mask_BxT).sum(0) / jnp.maximum(mask_BxT.sum(0), 1.0)
      own = dict(own, worst_position=jnp.min(jnp.where(mask_BxT.sum(0) > 0, per_T, 1.0)))
    return (loss_BxT * mask_BxT).sum() / count, ((correct_BxT * mask_BxT).sum() / count, own)

  def update(state: State, hp: Hparams, grads, loss, acc, own):
    own = dict(own)
    worst = own.pop("worst_position", None)
    lr = learning_rate(hp, state.step, tcfg)
    opt_state = set_hyperparams(state.opt_state, lr, hp.weight_decay)
    updates, opt_state = tx.update(grads, opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    finite = jnp.isfinite(loss) & jnp.all(jnp.asarray(
        [jnp.all(jnp.isfinite(g)) for g in jax.tree.leaves(grads)]))
    ok = finite & ~state.frozen
    keep = lambda new, old: jax.tree.map(lambda a, b: jnp.where(ok, a, b), new, old)
    last = grid_last
    if tcfg.curriculum == "fixed":
      stage = jnp.minimum((state.step + 1) // max(tcfg.steps_per_stage, 1), last)
    elif tcfg.curriculum == "adaptive":
      stage = jnp.minimum(state.stage + (acc >= tcfg.advance_at), last)
    else:
      stage = state.stage
    if grows:  # past the grid's length: on when every counted position is solved
      at_grid_end = state.stage >= grid_last
      stage = jnp.where(at_grid_end, jnp.minimum(
          state.stage + (worst >= tcfg.advance_at), len(stages) - 1), stage)
    new = State(params=keep(params, state.params), opt_state=keep(opt_state, state.opt_state),
                step=state.step + 1, stage=jnp.where(ok, stage, state.stage),
                frozen=state.frozen | ~finite)
    metrics = dict(loss=loss, accuracy=acc, lr=lr, stage=state.stage, frozen=new.frozen,
                   paid=jnp.int32(t), **own)
    return new, metrics

  return prepare, loss_of, update


def make_step(task, cfg: ModelConfig, tcfg: TrainConfig, positions: int | None = None):
  """One training step of ONE model at `positions` (a length bucket; None: the full
  length): (state, hparams, arch) -> (state, metrics)."""
  model = Transformer(cfg)
  prepare, loss_of, update = _step_parts(task, tcfg, positions)

  def loss_fn(params, arch, batch, active_T):
    out = jax.vmap(lambda x: model.apply({"params": params}, x, arch))(batch.inputs)
    return loss_of(out, batch, active_T)

  def step(state: State, hp: Hparams, arch: Arch):
    batch, active_T = prepare(state, hp)
    (loss, (acc, own)), grads = jax.value_and_grad(loss_fn, has_aux=True)(
        state.params, arch, batch, active_T)
    return update(state, hp, grads, loss, acc, own)

  return step


def make_compact_step(task, cfg: ModelConfig, tcfg: TrainConfig, positions: int | None = None):
  """One training step of the M models of a compacted group (in program order) at
  `positions` (as make_step): the per-model pieces vmapped, the forward pass through
  model.compact (it sees M). Gradients of the summed losses are each model's own (models
  share no parameters)."""
  prepare, loss_of, update = _step_parts(task, tcfg, positions)

  def step_M(state_M: State, hp_M: Hparams, arch_M: Arch):
    batch_M, active_M = jax.vmap(prepare)(state_M, hp_M)

    def total(params_M):
      out_M = compact.forward(cfg, tcfg.profile, params_M, batch_M.inputs, arch_M)
      loss_M, (acc_M, own_M) = jax.vmap(loss_of)(out_M, batch_M, active_M)
      return loss_M.sum(), (loss_M, acc_M, own_M)
    (_, (loss_M, acc_M, own_M)), grads_M = jax.value_and_grad(total, has_aux=True)(
        state_M.params)
    return jax.vmap(update)(state_M, hp_M, grads_M, loss_M, acc_M, own_M)

  return step_M
