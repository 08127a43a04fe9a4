"""Accelerators: a table of known device peaks, what JAX sees here, and a matmul probe.

The table prices a plan for a device this machine does not have (`plan --no-probe
--device h100`); `local()` describes the devices JAX sees (`depthscale devices`).
The table needs no JAX runtime; never imports sweep/ or core/.
"""
from __future__ import annotations

import dataclasses
import os
import statistics
import time

from depthscale.errors import UserError


@dataclasses.dataclass(frozen=True)
class DeviceSpec:
  """One accelerator's dense matmul peaks (TFLOP/s, no sparsity) and memory (GB)."""
  name: str
  platform: str                   # gpu | tpu | cpu
  peak_tflops: dict               # compute dtype -> dense peak; float32 = full fp32 (no TF32)
  memory_gb: float
  kinds: tuple[str, ...] = ()     # substrings of jax's device_kind that identify it

  def peak_flops(self, dtype: str) -> float:
    """The dense matmul peak of one device in `dtype`, in FLOP/s."""
    return self.peak_tflops[dtype] * 1e12


# Vendor datasheet figures (SXM/OAM parts). float32 is full-precision fp32, which is what
# `depthscale run` asks for (jax_default_matmul_precision=highest): not TF32, not bf16
# passes. TPUs have no fp32 matmul unit: "highest" runs 6 bf16 passes, hence bf16 / 6.
TABLE = {
    "h100": DeviceSpec("h100", "gpu", {"bfloat16": 989.0, "float32": 67.0}, 80.0,
                       ("H100",)),
    "h200": DeviceSpec("h200", "gpu", {"bfloat16": 989.0, "float32": 67.0}, 141.0,
                       ("H200",)),
    "a100": DeviceSpec("a100", "gpu", {"bfloat16": 312.0, "float32": 19.5}, 80.0,
                       ("A100",)),
    "tpu-v4": DeviceSpec("tpu-v4", "tpu", {"bfloat16": 275.0, "float32": 275.0 / 6}, 32.0,
                         ("TPU v4",)),
    "tpu-v5e": DeviceSpec("tpu-v5e", "tpu", {"bfloat16": 197.0, "float32": 197.0 / 6}, 16.0,
                          ("TPU v5 lite", "TPU v5e")),
    "tpu-v5p": DeviceSpec("tpu-v5p", "tpu", {"bfloat16": 459.0, "float32": 459.0 / 6}, 95.0,
                          ("TPU v5p", "TPU v5")),
}
CPU = "cpu"  # --device cpu: this machine's CPU, peak measured by the matmul probe
DTYPES = ("float32", "bfloat16")  # what the probe and the table know


def lookup(name: str) -> DeviceSpec | None:
  """The table's entry for `name` (h100, a100, tpu-v5e, ...); None for `cpu`; a one-line
  UserError listing the valid names otherwise."""
  key = name.strip().lower()
  if key == CPU:
    return None
  if key not in TABLE:
    raise UserError(f"--device {name!r}: unknown device; valid: {', '.join(TABLE)}, {CPU}")
  return TABLE[key]


def from_kind(device_kind: str) -> DeviceSpec | None:
  """The table's entry for a jax device_kind ("NVIDIA H100 80GB HBM3"), or None."""
  for spec in TABLE.values():
    if any(k.lower() in device_kind.lower() for k in spec.kinds):
      return spec
  return None


def rate(peak_flops: float, mfu: float, count: int = 1) -> float:
  """The FLOP/s a plan assumes of `count` devices of one kind: each one's dense peak
  (DeviceSpec.peak_flops in the study's dtype, or a measured matmul peak) times the
  model-FLOPs utilisation `mfu` (plan.mfu). The one place peak x mfu is computed."""
  return peak_flops * mfu * count


def probe_size(platform: str) -> int:
  """The probe's matrix side: large enough to fill an accelerator, quick on a CPU."""
  return 8192 if platform in ("gpu", "tpu") else 1024


def matmul_peak_gflops(dtype: str = "float32", n: int | None = None, repeats: int = 10,
                       device=None) -> float:
  """Median GFLOP/s of a jitted [n, n] @ [n, n] (2 n^3 flops) on one device, in dtype, at
  the precision `depthscale run` uses (highest)."""
  import jax
  import jax.numpy as jnp
  device = device or jax.local_devices()[0]
  n = n or probe_size(device.platform)
  with jax.default_matmul_precision("highest"):
    a_NxN = jax.device_put(jax.random.normal(jax.random.key(0), (n, n), dtype), device)
    b_NxN = jax.device_put(jax.random.normal(jax.random.key(1), (n, n), dtype), device)
    dot = jax.jit(jnp.dot)
    dot(a_NxN, b_NxN).block_until_ready()
    times = []
    for _ in range(repeats):
      t0 = time.perf_counter()
      dot(a_NxN, b_NxN).block_until_ready()
      times.append(time.perf_counter() - t0)
  return 2 * n ** 3 / statistics.median(times) / 1e9


def memory_limit_bytes(device) -> int | None:
  """What one device may allocate: the runtime's limit on a GPU/TPU; None on a CPU (the
  host's memory is shared; plan.device_memory_gb sets a limit there)."""
  stats = device.memory_stats() if hasattr(device, "memory_stats") else None
  if stats and stats.get("bytes_limit"):
    return int(stats["bytes_limit"])
  return None


def host_memory_bytes() -> int:
  return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def local(dtype: str = "float32", probe: bool = True) -> dict:
  """What JAX sees on this host: platform, kind, count, memory per device, the table's
  peak for it (if known) and, with `probe`, a measured matmul peak in dtype (on the first
  device, an [n, n] product with n = probe_n)."""
  if dtype not in DTYPES:
    raise UserError(f"--dtype {dtype!r}: the probe knows {', '.join(DTYPES)}")
  import jax
  devs = jax.local_devices()
  d0 = devs[0]
  known = from_kind(d0.device_kind)
  limit = memory_limit_bytes(d0)
  out = {"platform": d0.platform, "kind": d0.device_kind, "count": len(devs),
         "processes": jax.process_count(), "jax_version": jax.__version__,
         "backend_version": _backend_version(),
         "memory_bytes_per_device": limit,
         "memory_note": ("runtime limit per device" if limit else
                         f"host memory {host_memory_bytes() / 2**30:.1f} GiB shared by the "
                         f"{len(devs)} CPU devices"),
         "table": dataclasses.asdict(known) if known else None,
         "dtype": dtype,
         "table_peak_gflops": (known.peak_tflops[dtype] * 1e3
                               if known and dtype in known.peak_tflops else None)}
  if probe:
    out["probe_n"] = probe_size(d0.platform)
    out["matmul_peak_gflops"] = matmul_peak_gflops(dtype, n=out["probe_n"], device=d0)
    if out["table_peak_gflops"]:
      out["fraction_of_table_peak"] = out["matmul_peak_gflops"] / out["table_peak_gflops"]
  return out


def _backend_version() -> str:
  import jax
  try:
    return jax.local_devices()[0].client.platform_version
  except Exception:  # an informational field: older/newer jax may move it
    return "unknown"
