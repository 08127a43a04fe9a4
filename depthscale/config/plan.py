"""The plan section: how a study's models are grouped into programs and priced (the
strategy, the group size, the assumed rates and device memory), and its checks. The
valid strategies are sweep/plan.py's, which acts on them."""
from __future__ import annotations

import ml_collections

from depthscale.config.base import ConfigError, choice, number
from depthscale.config.fields import field, one_of, section
from depthscale.sweep import plan as planner


def add(c: ml_collections.ConfigDict) -> None:
  section(c, "plan", "how the study's models are grouped into programs and priced")
  field(c, "plan.strategy", "auto", f"how groups are laid out: {one_of(planner.STRATEGIES)} "
        "(sweep/plan.py): pad, one padded program per length; bucket, one per true shape; "
        "compact, pad whose layers run only on the models that have them; auto, per length "
        "the cheapest by the rates below")
  field(c, "plan.max_models_per_group", 64, "the most models one program trains")
  field(c, "plan.gflops", 20.0, "the CPU FLOP rate (GFLOP/s) the auto strategy assumes; on "
        "a known accelerator its table peak x mfu is used (devices.py)")
  field(c, "plan.compile_s", 20.0, "the seconds per program's compile the planner assumes")
  field(c, "plan.device_memory_gb", 0.0, "> 0: each group's compiled program must fit it "
        "(else models_per_chunk, remat or a split, chosen by the plan); 0: the device's own "
        "limit (none on a CPU)")
  field(c, "plan.mfu", 0.4, "the fraction of an accelerator's peak FLOP rate assumed, in "
        "(0, 1]")
  field(c, "plan.cpu_devices", 0, "> 0: on a CPU host, JAX's CPU is split into this many "
        "devices before it starts (one per core trains fastest; float32 results depend on "
        "the count, so it is the study's); 0: as JAX starts (one device, unless XLA_FLAGS "
        "forces a count)")


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
