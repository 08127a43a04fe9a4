"""The eval section: the held-out set every model is measured on (its size, and the
accuracy that counts as solved), and its checks."""
from __future__ import annotations

import ml_collections

from depthscale.config.base import accuracy, examples
from depthscale.config.fields import field, section


def add(c: ml_collections.ConfigDict) -> None:
  section(c, "eval", "the held-out set every model is measured on")
  field(c, "eval.size", 1000, "held-out examples per evaluation (at most 2^20)")
  field(c, "eval.threshold", 0.95, "the held-out accuracy in (0, 1] that counts as solved")


def check_size(c) -> None:
  examples(c, "eval.size")


def check_threshold(c) -> None:
  accuracy(c, "eval.threshold")
