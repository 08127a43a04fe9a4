"""The plan section: how a study's models are grouped into programs and priced (the
strategy, the group size, the assumed rates and device memory), and its checks. The
valid strategies are sweep/plan.py's, which acts on them."""
from __future__ import annotations

import ml_collections

from depthscale.config.base import ConfigError, choice, number
from depthscale.sweep import plan as planner


def add(c: ml_collections.ConfigDict) -> None:
  c.plan = ml_collections.ConfigDict(dict(strategy="auto", max_models_per_group=64,
                                          gflops=20.0, compile_s=20.0, device_memory_gb=0.0,
                                          mfu=0.4, cpu_devices=0))
  # device_memory_gb > 0: each group's compiled program must fit it (else models_per_chunk,
  # remat or a split, chosen by the plan); 0 = the device's own limit (none on a CPU).
  # gflops: the CPU FLOP rate the `auto` strategy assumes; on a known accelerator its
  # table peak x mfu is used (devices.py). compile_s: seconds per program it assumes.
  # cpu_devices > 0: on a CPU host, JAX's CPU is split into this many devices before it
  # starts (one per core trains fastest; float32 results depend on the count, so it is
  # the study's); 0 = as JAX starts (one device, unless XLA_FLAGS forces a count).


def check(c) -> None:
  number(c, "plan.device_memory_gb", 0.0)
  number(c, "plan.gflops", 0.0, strict=True)
  number(c, "plan.compile_s", 0.0)
  v = number(c, "plan.mfu", 0.0, strict=True)
  if v > 1:
    raise ConfigError(f"plan.mfu: {v!r} is a fraction of the device's peak; give a number "
                      "in (0, 1]")
  choice(c, "plan.strategy", planner.STRATEGIES)
  number(c, "plan.max_models_per_group", 1, integer=True)
  number(c, "plan.cpu_devices", 0, integer=True)
