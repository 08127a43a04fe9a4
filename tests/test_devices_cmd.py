"""`depthscale devices` on this CPU: what JAX sees, a matmul probe checked against an
independent numpy timing, the known-device table's names, one-line errors; and the
accelerator locks (requirements-cuda.lock, requirements-tpu.lock) extend the CPU lock.
"""
import json
import os
import statistics
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

from depthscale import cli, devices
from depthscale.cli import app
from depthscale.errors import UserError
from conftest import xla_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_count_is_what_jax_sees_with_four_forced_host_devices():
  """In a fresh process (XLA_FLAGS applies only before JAX starts): the command's JSON and
  jax.local_device_count() agree, and both are 4."""
  script = ("import contextlib, io, json, jax\n"
            "from depthscale import cli\n"
            "out = io.StringIO()\n"
            "with contextlib.redirect_stdout(out):\n"
            "  rc = cli.main(['devices', '--json', '--no-probe', '--dtype', 'bfloat16'])\n"
            "print(json.dumps({'rc': rc, 'info': json.loads(out.getvalue()),\n"
            "                  'jax_count': jax.local_device_count()}))\n")
  env = xla_env(4)
  p = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True,
                     text=True, timeout=120)
  assert p.returncode == 0, p.stderr[-2000:]
  result = json.loads(p.stdout.strip().splitlines()[-1])
  info = result["info"]
  assert result["rc"] == 0
  assert info["count"] == result["jax_count"] == 4
  assert info["platform"] == "cpu" and info["processes"] == 1 and info["dtype"] == "bfloat16"
  assert info["table"] is None and info["table_peak_gflops"] is None
  assert info["memory_bytes_per_device"] is None and "shared by the 4 CPU devices" in info[
      "memory_note"]
  assert "matmul_peak_gflops" not in info  # --no-probe


def test_text_output_fields(capsys):
  rc = cli.main(["devices"])
  out, err = capsys.readouterr()
  assert rc == 0, err
  fields = dict(line.split(": ", 1) for line in out.strip().splitlines())
  assert fields["platform"] == "cpu"
  assert fields["count"].startswith(f"{jax.local_device_count()} local device(s)")
  assert "host memory" in fields["memory per device"]
  probe = [v for k, v in fields.items() if k.startswith("matmul peak, measured (float32")]
  assert len(probe) == 1 and float(probe[0].split()[0]) > 0
  assert "not in it" in fields["table"]


def test_probe_agrees_with_numpy_timing():
  """The probe's GFLOP/s (XLA) and numpy's (BLAS) on the same [n, n] float32 product are
  within a factor of 10 of each other: different libraries, cores shared with other work."""
  info = devices.local("float32")
  n = info["probe_n"]
  assert info["matmul_peak_gflops"] > 0
  a_NxN = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
  b_NxN = np.random.default_rng(1).standard_normal((n, n), dtype=np.float32)
  a_NxN @ b_NxN
  times = []
  for _ in range(10):
    t0 = time.perf_counter()
    a_NxN @ b_NxN
    times.append(time.perf_counter() - t0)
  numpy_gflops = 2 * n ** 3 / statistics.median(times) / 1e9
  ratio = info["matmul_peak_gflops"] / numpy_gflops
  print(f"probe {info['matmul_peak_gflops']:.1f} GFLOP/s, numpy {numpy_gflops:.1f}, "
        f"ratio {ratio:.2f}")
  assert 0.1 < ratio < 10, ratio


@pytest.mark.parametrize("kind, name", [
    ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H200", "h200"),
    ("NVIDIA A100-SXM4-80GB", "a100"), ("TPU v4", "tpu-v4"), ("TPU v5 lite", "tpu-v5e"),
    ("TPU v5e", "tpu-v5e"), ("TPU v5p", "tpu-v5p"), ("cpu", None), ("NVIDIA L4", None)])
def test_from_kind(kind, name):
  spec = devices.from_kind(kind)
  assert (spec.name if spec else None) == name


def test_text_for_a_known_gpu():
  """The lines for an H100 (an info dict as local() writes it there): memory in GiB and the
  measured peak as a fraction of the table's."""
  spec = devices.TABLE["h100"]
  info = {"platform": "gpu", "kind": "NVIDIA H100 80GB HBM3", "count": 1, "processes": 1,
          "backend_version": "PJRT C API", "memory_bytes_per_device": 79 * 2**30,
          "memory_note": "runtime limit per device", "table": {"name": "h100"},
          "dtype": "bfloat16", "table_peak_gflops": spec.peak_tflops["bfloat16"] * 1e3,
          "probe_n": 8192, "matmul_peak_gflops": 741750.0,
          "fraction_of_table_peak": 741750.0 / 989000.0}
  lines = app.format_devices(info)
  assert "memory per device: 79.0 GiB (runtime limit per device)" in lines
  assert lines[-1] == "table: h100, bfloat16 peak 989000 GFLOP/s; measured at 75% of it"


def test_bad_dtype_is_one_line(capsys):
  assert cli.main(["devices", "--dtype", "float16"]) == 2
  out, err = capsys.readouterr()
  assert out == "" and len(err.strip().splitlines()) == 1 and "--dtype" in err
  with pytest.raises(UserError, match="float16"):
    devices.local("float16", probe=False)


def pins(name):
  with open(os.path.join(ROOT, name)) as f:
    lines = [line.split("#")[0].strip() for line in f]
  return dict(line.split("==") for line in lines if line)


@pytest.mark.parametrize("lock, added", [
    ("requirements-cuda.lock", {"jax-cuda12-plugin", "jax-cuda12-pjrt"}),
    ("requirements-tpu.lock", {"libtpu"})])
def test_accelerator_locks_extend_the_cpu_lock(lock, added):
  """Every pin of requirements.lock, same version (the CPU figures hold for the same
  jax), plus the accelerator's plugin at the locked jax version (libtpu: any)."""
  cpu, acc = pins("requirements.lock"), pins(lock)
  assert {n: acc.get(n) for n in cpu} == cpu
  assert added <= set(acc)
  for name in added & {"jax-cuda12-plugin", "jax-cuda12-pjrt"}:
    assert acc[name] == cpu["jax"]
