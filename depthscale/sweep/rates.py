"""The step rates a plan assumes where it cannot probe (`plan --device h100` on a machine
without one): the engine's own programs as measured on that device, kept here, not a
flat fraction of the datasheet peak. BUILD_NOTES ("Measured rates for the planner") has
each figure's command and the code it measured; a probe of new code on a GPU replaces
them (tools/gpu/gpu_check.sh prints what to write here).

A group's seconds per step = max(floor, FLOPs / (table peak x fraction)): `fraction` is
the achieved fraction of the table's peak of the nearest measured shape class (the same
device family and compute dtype; nearest in log width, log depth and log tokens per step
of the whole group), `floor` the shortest step measured on that family (a small
program's step is bound by launching its kernels, not by its FLOPs). Where no class of
that dtype was measured, plan.mfu is the fraction, and the plan says so.
"""
from __future__ import annotations

import dataclasses
import math

from depthscale import devices as devices_lib
from depthscale.sweep import plan

FAMILIES = {"h100": "hopper", "h200": "hopper"}  # same chip, same peaks (devices.TABLE)


@dataclasses.dataclass(frozen=True)
class Measured:
  """One program's seconds per step, measured on `device` (a devices.TABLE name)."""
  name: str
  device: str
  dtype: str
  width: int
  depth: int
  seq: int
  batch: int
  models: int
  out_dim: int
  step_s: float
  code: str    # the commit it measured (BUILD_NOTES has the command)

  def fraction(self) -> float:
    """The achieved fraction of the table's peak: the planner's FLOPs over the time."""
    flops = self.models * plan.step_flops(self.depth, self.width, 1, self.seq, self.batch,
                                          out_dim=self.out_dim)
    return flops / self.step_s / devices_lib.TABLE[self.device].peak_flops(self.dtype)

  def label(self) -> str:
    return (f"{self.name} ({self.models} x width {self.width}, depth {self.depth}, "
            f"{self.batch} x {self.seq} tokens, {self.dtype}) on an {self.device.upper()} "
            f"at {self.code}")


def _a5(depth: int, step_s: float) -> Measured:
  return Measured(f"a5_depth depth {depth}", "h100", "bfloat16", 512, depth, 128, 128, 3, 60,
                  step_s, "b76a9fe")


# `plan --config experiments/a5_depth.py` probed on one H100 (issue 48, 2026-11-27); the
# bench presets on the same H100 and, for the smoke study, on an H200 (8a9a5d9, 2026-11-26).
MEASURED = (
    *(_a5(d, s) for d, s in ((6, 0.048), (9, 0.101), (12, 0.130), (15, 0.155), (18, 0.186),
                             (21, 0.210), (24, 0.242))),
    Measured("bench medium x64", "h100", "bfloat16", 256, 4, 64, 32, 64, 60, 64 / 1319,
             "b76a9fe"),
    Measured("bench tiny x256", "h100", "float32", 32, 2, 16, 16, 256, 60, 256 / 93801,
             "b76a9fe"),
    Measured("quickstart smoke", "h200", "float32", 32, 3, 17, 16, 6, 5, 0.35 / 300,
             "8a9a5d9"),
)


@dataclasses.dataclass(frozen=True)
class Rate:
  """How a plan prices a group's step on a device it does not probe."""
  fraction: float
  floor_s: float
  source: str  # said beside the figure: which measurement, or plan.mfu


def _distance(m: Measured, width: int, depth: int, tokens: float) -> float:
  return (abs(math.log2(m.width / width)) + abs(math.log2(m.depth / max(depth, 1)))
          + abs(math.log2(m.models * m.batch * m.seq / tokens)))


def rate(device: str, dtype: str, width: int, depth: int, tokens: float, mfu: float,
         measured=MEASURED) -> Rate:
  """The fraction and floor for a group of total `tokens` per step (models x batch x seq)
  at (width, depth) on `device`, from the nearest class in `measured`; plan.mfu if none."""
  family = FAMILIES.get(device, device)
  same = [m for m in measured if FAMILIES.get(m.device, m.device) == family]
  floor = min((m.step_s for m in same), default=0.0)
  near = [m for m in same if m.dtype == dtype]
  if not near:
    return Rate(mfu, floor, f"plan.mfu {mfu:g}: no {dtype} program measured on this device")
  best = min(near, key=lambda m: _distance(m, width, depth, tokens))
  return Rate(best.fraction(), floor,
              f"{100 * best.fraction():.1f}% of peak, measured for {best.label()}")


def step_seconds(r: Rate, flops: float, peak_flops: float) -> float:
  return max(r.floor_s, flops / (peak_flops * r.fraction))
