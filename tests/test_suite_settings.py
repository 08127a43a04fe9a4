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


MAPS = "import os; print(os.path.realpath(os.environ['DEPTHSCALE_TEST_TCMALLOC']) in open('/proc/self/maps').read())"


@pytest.mark.skipif(not os.environ.get("DEPTHSCALE_TEST_TCMALLOC"),
                    reason="not run by `make test` with tcmalloc (Makefile)")
def test_make_test_runs_every_process_with_tcmalloc():
  """`make test` preloads tcmalloc (Makefile: about 20% of the suite's time); a wrong path
  or a lost LD_PRELOAD would only show as a slower suite, so the worker and a process it
  starts must both have it mapped."""
  lib = os.path.realpath(os.environ["DEPTHSCALE_TEST_TCMALLOC"])
  with open("/proc/self/maps") as f:
    assert lib in f.read(), f"{lib} is not loaded in this pytest worker"
  p = subprocess.run([sys.executable, "-c", MAPS], capture_output=True, text=True, check=True)
  assert p.stdout.strip() == "True", f"{lib} is not loaded in a process the test starts"
