"""The suite's XLA setting (tests/conftest.py): most optimizations off, except in a test
marked `optimized`, there and in the processes it starts; kept executables are told
apart by the setting."""
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest

from conftest import FAST_COMPILE, OPTIMIZE, SETTING
from depthscale.core import compiled

pytestmark = pytest.mark.skipif(OPTIMIZE != "marked", reason="DEPTHSCALE_TEST_OPTIMIZE set")

CHILD = f"import jax; print(jax.config.values['{SETTING}'])"


def _child_setting():
  p = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=True)
  return p.stdout.strip()


def test_an_unmarked_test_compiles_with_most_optimizations_off():
  assert jax.config.values[SETTING] is True
  assert os.environ["JAX_DISABLE_MOST_OPTIMIZATIONS"] == "1" and _child_setting() == "True"


def test_every_test_and_its_processes_compile_without_the_fusion_emitters():
  assert FAST_COMPILE in os.environ["XLA_FLAGS"].split()  # inherited by every subprocess
  child = "import jax; jax.devices(); import os; print(os.environ['XLA_FLAGS'])"
  p = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=True)
  assert FAST_COMPILE in p.stdout.split()


@pytest.mark.optimized
def test_a_marked_test_compiles_at_full_optimization_and_so_do_its_processes():
  assert jax.config.values[SETTING] is False
  assert os.environ["JAX_DISABLE_MOST_OPTIMIZATIONS"] == "0" and _child_setting() == "False"


def test_an_executable_kept_at_one_setting_is_not_reused_at_the_other():
  lowered = jax.jit(lambda x: jnp.tanh(x) * 3.0).lower(jnp.ones((7, 5)))
  devices = jax.local_devices()[:1]
  first = compiled.compile_lowered(lowered, devices)
  assert compiled.compile_lowered(lowered, devices).executable is first.executable
  jax.config.update(SETTING, False)
  try:
    other = compiled.compile_lowered(lowered, devices)
  finally:
    jax.config.update(SETTING, True)
  assert other.executable is not first.executable
  assert compiled.compile_lowered(lowered, devices).executable is first.executable


def test_the_workers_compile_under_runs_settings_from_the_start():
  """conftest gives a test process `run`'s settings at import (the deterministic-ops flag
  in XLA_FLAGS, float32 matmuls at "highest"), so that a `run`, `plan` or `bench` inside a
  test (sweep/study.reproducible_xla) changes none of JAX's keys: the programs compiled
  before it are read back after it, and from the other worker and the tests' processes
  (BUILD_NOTES, Test suite). In a fresh process, as a worker starts."""
  code = ("import conftest, os, jax; from depthscale.sweep import study; "
          "before = (os.environ['XLA_FLAGS'], jax.config.jax_default_matmul_precision); "
          "study.reproducible_xla(); "
          "print(before == (os.environ['XLA_FLAGS'], jax.config.jax_default_matmul_precision), "
          "*before)")
  p = subprocess.run([sys.executable, "-c", code], cwd=os.path.dirname(__file__),
                     capture_output=True, text=True, timeout=120)
  assert p.returncode == 0, p.stderr[-2000:]
  unchanged, *flags, precision = p.stdout.split()
  assert unchanged == "True" and precision == "highest", p.stdout
  assert "--xla_gpu_deterministic_ops=true" in flags, p.stdout
