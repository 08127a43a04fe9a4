"""The run's housekeeping fields: how often a group checkpoints, how long a worker's
lease on a group lasts without a heartbeat, and the W&B tracker, with their checks. The
valid tracker modes are io/trackers.py's."""
from __future__ import annotations

import math

import ml_collections

from depthscale.config.base import ConfigError, choice
from depthscale.config.fields import field, one_of, section
from depthscale.io import trackers

MIN_LEASE_S = 2.0   # heartbeats every lease_s / 4: faster ones only load the filesystem


def add(c: ml_collections.ConfigDict) -> None:
  field(c, "checkpoint_every", 500, "steps between a group's checkpoints (a multiple of "
        "train.steps_per_call)")
  field(c, "lease_s", 300.0, "seconds without a heartbeat after which a group's worker "
        f"may be taken over (at least {MIN_LEASE_S:g} s; workers renew every lease_s / 4)")
  section(c, "wandb", "the Weights & Biases tracker")
  field(c, "wandb.mode", "", f"{one_of(trackers.MODES)}, or '': WANDB_MODE if set, else "
        "online if logged in (else offline)")
  field(c, "wandb.project", "depthscale", "the W&B project runs are logged to")


def check_checkpoint_every(c, k: int) -> None:
  """checkpoint_every a multiple of train.steps_per_call (`k`)."""
  every = c.checkpoint_every
  if isinstance(every, bool) or not isinstance(every, int) or every < k or every % k:
    raise ConfigError(f"checkpoint_every: {every!r} must be a multiple of "
                      f"train.steps_per_call={k}")


def check_lease(c) -> None:
  lease = c.get("lease_s")
  if isinstance(lease, bool) or not isinstance(lease, (int, float)) or not lease > 0 \
      or not math.isfinite(lease):
    raise ConfigError(f"lease_s: {lease!r} is not a finite number of seconds > 0")
  if lease < MIN_LEASE_S:
    raise ConfigError(f"lease_s: {lease:g} s; give at least {MIN_LEASE_S:g} s (workers "
                      "renew their lease every lease_s / 4)")


def check_wandb(c) -> None:
  choice(c, "wandb.mode", ("",) + trackers.MODES)
