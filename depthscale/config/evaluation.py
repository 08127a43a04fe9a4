"""The eval section: the held-out set every model is measured on (its size, and the
accuracy that counts as solved), and its checks."""
from __future__ import annotations

import ml_collections

from depthscale.config.base import accuracy, examples


def add(c: ml_collections.ConfigDict) -> None:
  c.eval = ml_collections.ConfigDict(dict(size=1000, threshold=0.95))


def check_size(c) -> None:
  examples(c, "eval.size")


def check_threshold(c) -> None:
  accuracy(c, "eval.threshold")
