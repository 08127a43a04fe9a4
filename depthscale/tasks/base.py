"""The task contract: a pure, jittable, vmappable sampler of (inputs, targets, mask).

Every task is written for one example stream and knows nothing of models.
Must not import depthscale.model, depthscale.core or anything above them.
"""
from __future__ import annotations

import abc
from typing import Any

import flax.struct
import jax
from depthscale.errors import UserError


@flax.struct.dataclass
class Batch:
  """One batch. Leading axes [B, T]; `mask` marks positions that count in loss/accuracy.

  inputs:  int32 [B, T] token ids, or float32 [B, T, input_dim] for continuous tasks.
  targets: int32 [B, T] class ids, or float32 [B, T, output_dim] for regression tasks.
  mask:    bool [B, T].
  """
  inputs: jax.Array
  targets: jax.Array
  mask: jax.Array

  def prefix(self, positions: int) -> "Batch":
    """The first `positions` positions (itself if it has no more): of a prefix-consistent
    task, the same examples at a shorter length."""
    if self.mask.shape[1] <= positions:
      return self
    return self.replace(inputs=self.inputs[:, :positions], targets=self.targets[:, :positions],
                        mask=self.mask[:, :positions])


class Task(abc.ABC):
  """A synthetic task. Subclasses set the attributes below in __init__.

  Attributes:
    name: registry name.
    loss: "xent" (integer targets, `output_dim` classes) or "mse" (float targets).
    input_vocab: number of input token ids, or None for continuous inputs.
    input_dim: features per input position when continuous, else None.
    default_length: the paper's size parameter.
    prefix_consistent: True when the first t positions of an example at length n are an
      example at length t (labels depend on the prefix only): a length curriculum may
      then mask later positions instead of resampling.
    scaled_by: what the report scales with depth (width, repeats): "n_star", the leading
      positions solved (one label per position), or "size", the largest size (grid
      length) whose held-out accuracy reaches the threshold (one decision per example),
      or "loss", no law over a solved length (regression: held-out and partial losses).
  """
  name: str
  loss: str
  input_vocab: int | None
  input_dim: int | None
  default_length: int
  prefix_consistent: bool = False
  scaled_by: str = "n_star"

  @abc.abstractmethod
  def output_dim(self, length: int) -> int:
    """Classes (xent) or values (mse) per output position at size `length`."""

  @abc.abstractmethod
  def seq_len(self, length: int) -> int:
    """Number of sequence positions T for size parameter `length`."""

  @abc.abstractmethod
  def sample(self, key: jax.Array, batch_size: int, length: int) -> Batch:
    """A batch of `batch_size` examples at size `length` (static). Pure in `key`."""

  @abc.abstractmethod
  def decode(self, batch: Batch, i: int) -> dict[str, Any]:
    """Example `i` of `batch` in plain Python (lists, ints, bools, floats)."""

  def levels(self, batch: Batch) -> tuple[jax.Array, int] | None:
    """For tasks that mix difficulties in one batch (k-hop with k per sequence): the
    level of each example (int32 [B], in 0..L-1) and L; evaluation then reports accuracy
    per level and the hardest level solved. None for single-difficulty tasks."""
    return None

  def measure_names(self, length: int) -> tuple[str, ...]:
    """Names of the task's own measures (see `measures`) at size `length`; () if none."""
    return ()

  def measures(self, out: jax.Array, batch: Batch) -> dict[str, jax.Array]:
    """The task's own measures of ONE model on `batch` (jittable): {name: scalar}, one
    per `measure_names`, from its outputs `out` ([B, T, output_dim]). They are recorded
    per training step (curves) and on the held-out set (rows, as `eval_<name>`)."""
    return {}

  def options(self) -> dict[str, Any]:
    """The options this task was made with (for configs and reports)."""
    return dict(self._options)

  def check_length(self, length: int) -> None:
    """Raise a one-line ValueError if `length` is not a valid size parameter."""
    if not isinstance(length, int) or isinstance(length, bool) or length < 1:
      raise UserError(f"{self.name}: length must be a positive int, got {length!r}")

  def __repr__(self) -> str:
    opts = ", ".join(f"{k}={v!r}" for k, v in self.options().items())
    return f"{type(self).__name__}({opts})"


def check_options(task_name: str, given: dict[str, Any], valid: dict[str, str]) -> None:
  """Raise a one-line ValueError naming unknown options and listing the valid ones."""
  unknown = sorted(set(given) - set(valid))
  if unknown:
    listing = ", ".join(f"{k} ({v})" for k, v in valid.items())
    raise UserError(f"{task_name}: unknown option(s) {', '.join(unknown)}; valid options: {listing}")
