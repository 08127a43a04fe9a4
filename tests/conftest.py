"""Shared test settings and fixtures.

Numpy-style rank promotion is an error (as in nanodo); `reference_run` is one uninterrupted
single-process run of the quickstart smoke study split into 2 groups, which the
multi-process, concurrent-launch and SLURM tests compare against.
"""
import collections
import contextlib
import csv
import fcntl
import gc
import glob
import importlib.metadata
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

# Before JAX starts (here, and inherited by every `depthscale` process a test starts):
# XLA compiles with most optimizations off (LLVM at -O0, no expensive passes). The suite's
# programs are small and most tests spend their time compiling, not running. It changes
# no float64 result (the equivalence tests and the drift guard run in float64), and
# float32 results in the last bit only, alike in every run the tests compare. Tests that
# mostly execute (long learning runs) are marked `optimized` and compile at XLA's full
# optimization (the `xla_optimization` fixture below; BUILD_NOTES, Test suite).
# DEPTHSCALE_TEST_OPTIMIZE=all compiles every test at full optimization, =none none.
OPTIMIZE = os.environ.get("DEPTHSCALE_TEST_OPTIMIZE", "marked")
SETTING = "jax_disable_most_optimizations"  # JAX's name for it, read at each compile
os.environ["JAX_DISABLE_MOST_OPTIMIZATIONS"] = "0" if OPTIMIZE == "all" else "1"
# what the processes of an `optimized` test (and the reference run) are started with
OPTIMIZED_ENV = {} if OPTIMIZE == "none" else {"JAX_DISABLE_MOST_OPTIMIZATIONS": "0"}
# And XLA's CPU fusion emitters off, in every test and every process a test starts: it
# compiles the suite's float64 programs about 2-3x faster and changes their results at the
# last bits only (1.6e-15 on the padded-equivalence program; BUILD_NOTES, Test suite),
# alike on both sides of every comparison; the drift guard's tolerance is 1e-6.
# jaxlib 0.11's XLA no longer knows the flag and aborts at start on it (seen on a GPU
# machine's jax 0.11.2, BUILD_NOTES, the third GPU check): set for the lock's jaxlib only.
FAST_COMPILE = "--xla_cpu_use_fusion_emitters=false"
_JAXLIB = tuple(int(x) for x in importlib.metadata.version("jaxlib").split(".")[:2])
if OPTIMIZE != "all" and _JAXLIB < (0, 11) and FAST_COMPILE not in os.environ.get("XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {FAST_COMPILE}".strip()

import jax  # noqa: E402
import pytest  # noqa: E402

from depthscale import threefry  # noqa: E402,F401  before any lowering (depthscale/threefry.py)
from depthscale.cli import main as cli_main  # noqa: E402
from depthscale.cli.app import GC_THRESHOLDS  # noqa: E402
from depthscale.sweep.study import reproducible_xla  # noqa: E402

jax.config.update("jax_numpy_rank_promotion", "raise")
# `depthscale run`'s settings (the deterministic-ops flag in XLA_FLAGS, float32 matmuls at
# "highest") from the start, as in every `depthscale` process a test starts. Both are in
# JAX's keys (XLA_FLAGS in the persistent cache's, the precision in jit's), so a worker that
# took them up only at its first in-process run compiled its programs again after it, and
# could not read what the other worker or a test's processes had compiled (BUILD_NOTES,
# Test suite). Neither changes a CPU result.
reproducible_xla()

# Python's cyclic garbage collector as in a `depthscale` process (cli/app.py): a worker
# holds the traces and programs of hundreds of tests, and each full collection walks them
# all. forget_compiled_programs collects after dropping programs, so their memory maps go
# when they do.
gc.set_threshold(*GC_THRESHOLDS)


def xla_env(devices: int, **extra) -> dict:
  """os.environ for a test's subprocess with `devices` forced CPU devices."""
  flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}"
  return dict(os.environ, XLA_FLAGS=flags, **extra)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPLIT_SMOKE = ["--config", "experiments/quickstart.py:smoke", "--no-progress",
               "--config.plan.max_models_per_group=3",  # 2 groups of 3 models
               "--config.train.steps=180"]  # checkpoints at 60 and 120
# The reference run's programs are read from the cache and run by many processes (the
# kill -9, concurrent-launch and SLURM tests rerun the same study): they mostly execute, so
# the reference run compiles at full optimization, and so do the tests that compare a run
# of SPLIT_SMOKE with it (marked `optimized`: the same level on both sides, OPTIMIZED_ENV;
# BUILD_NOTES, Test suite).


def read_rows(workdir):
  """results.csv without the timing columns (those ending in _s)."""
  with open(os.path.join(workdir, "results.csv")) as f:
    return [{k: v for k, v in r.items() if not k.endswith("_s")} for r in csv.DictReader(f)]


def cli_here(*argv):
  """`depthscale ARGV` in this process, W&B disabled: (exit status, stdout, stderr). For
  the runs a test does not signal, kill or race: no process start, and a worker that ran
  the study before does not trace its programs again. Only at -O0 beside a `depthscale`
  process: a worker keeps what it compiled at -O0 (JAX's jit caches hold no optimization
  setting), and an `optimized` test reusing it trains to other float32 bits (BUILD_NOTES,
  Test suite)."""
  out, err = io.StringIO(), io.StringIO()
  with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(out), \
      contextlib.redirect_stderr(err):
    mp.setenv("WANDB_MODE", "disabled")
    code = cli_main(list(argv))
  return code, out.getvalue(), err.getvalue()


def shared_root(tmp_path_factory):
  """A directory all pytest-xdist workers of this test session share (pytest removes
  old ones after three sessions)."""
  root = tmp_path_factory.getbasetemp()
  return root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root


@pytest.fixture(scope="session", autouse=True)
def compilation_cache(tmp_path_factory):
  """The pytest workers and every `depthscale` process a test starts share one persistent
  XLA compilation cache: a program compiled once (the smoke study's groups in many runs,
  a lone shape in both workers) is read back after (measured: a smoke run 29.6 s cold,
  9.4 s warm, identical results). From 4225a44 to cb8a487 (2026-11-25) the workers stayed off
  it after a worker aborted inside a cache write; the cause was the process's memory maps,
  not the cache (forget_compiled_programs below; BUILD_NOTES, Test suite)."""
  cache = str(shared_root(tmp_path_factory) / "jax-cache")
  # the planner's probe cache too: tests never write to the user's ~/.cache
  os.environ["DEPTHSCALE_CACHE"] = str(shared_root(tmp_path_factory) / "depthscale-cache")
  os.environ["JAX_COMPILATION_CACHE_DIR"] = cache
  os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
  jax.config.update("jax_compilation_cache_dir", cache)
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)


@pytest.fixture(autouse=True)
def xla_optimization(request, monkeypatch):
  """A test marked `optimized` compiles at XLA's full optimization, in this process and
  in the processes it starts (unless DEPTHSCALE_TEST_OPTIMIZE=none)."""
  if request.node.get_closest_marker("optimized") is None or not OPTIMIZED_ENV:
    yield
    return
  for name, value in OPTIMIZED_ENV.items():
    monkeypatch.setenv(name, value)
  before = jax.config.values.get(SETTING, False)
  jax.config.update(SETTING, False)
  try:
    yield
  finally:
    jax.config.update(SETTING, before)


MAX_MAPS = 20_000  # memory maps a worker may hold before it drops its programs


def memory_maps() -> int:
  with open("/proc/self/maps") as f:
    return sum(1 for _ in f)


@pytest.fixture(scope="module", autouse=True)
def forget_compiled_programs():
  """After a module, JAX's cached executables are dropped once the process holds more than
  MAX_MAPS memory maps: a worker compiles thousands of programs, each holding maps, and
  one past vm.max_map_count (65530) aborts inside XLA (BUILD_NOTES, Test suite: the
  "Fatal Python error: Aborted" of the 2026-11-25 fresh-clone suites). Below it they are
  kept, so the next modules do not trace, lower and read again the programs they share
  (samplers, inits, evaluators). core/ensemble.py bounds the same in a long run."""
  yield
  if not os.path.exists("/proc/self/maps"):
    jax.clear_caches()
    return
  maps = memory_maps()
  _maps["peak"] = max(_maps["peak"], maps)
  if maps > MAX_MAPS:
    jax.clear_caches()
    gc.collect()
    _maps["dropped"] += 1


@pytest.fixture(scope="session")
def reference_run(tmp_path_factory):
  """(workdir, stderr) of the reference run; made once per test session, also when
  pytest-xdist workers share the session (the first to take the lock runs it)."""
  root = shared_root(tmp_path_factory)
  workdir, log = root / "reference", root / "reference.stderr"
  with open(root / "reference.lock", "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    if not log.exists():
      env = dict(os.environ, WANDB_MODE="offline", WANDB_SILENT="true",
                 **OPTIMIZED_ENV)
      p = subprocess.run([sys.executable, "-m", "depthscale.cli", "run", *SPLIT_SMOKE,
                          "--workdir", str(workdir)], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=900)
      assert p.returncode == 0, p.stderr[-2000:]
      log.write_text(p.stderr)
  return workdir, log.read_text()


def pytest_collection_modifyitems(config, items):
  """The slow end-to-end tests first, so that two xdist workers start them at once and
  the short tests fill in around them (instead of a long test starting last)."""
  items.sort(key=lambda item: item.get_closest_marker("slow") is None)
  if config.getoption("loadgroup", default=False):  # an xdist worker of `make test`
    for item in items:
      _send_with_its_group(item)


def _send_with_its_group(item):
  """The test's xdist_group as its nodeid's "@group" suffix, which `--dist loadgroup`
  schedules by. pytest-xdist 3.8 sets `item._nodeid`, which pytest 9 no longer reads (its
  nodeid is `item._id`), so without this every group is split over the workers and a
  module's fixtures are made on both (measured 2026-11-25, cb8a487)."""
  mark = item.get_closest_marker("xdist_group")
  if mark is None or "@" in item.nodeid:
    return
  if hasattr(item, "_id"):
    item._id = type(item._id).parse(f"{item.nodeid}@{mark.args[0]}")
  else:  # pytest < 9: xdist has done it
    item._nodeid = f"{item.nodeid}@{mark.args[0]}"


def planned(c):
  """(task, groups) of config `c` before any memory fit, as `depthscale plan` sees them."""
  from depthscale.sweep import plan, study
  s = study.resolve(c)
  return s.task, plan.make_plan(s)


# Where each pytest process spends JAX's time (its own, not its subprocesses'): tracing,
# lowering, and compiling or reading the persistent cache, summed over the run and printed
# under the durations, so the next person sees whether the suite compiles or runs.
JAX_TIME = {"/jax/core/compile/jaxpr_trace_duration": "trace",
            "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
            "/jax/core/compile/backend_compile_duration": "compile or cache read",
            "/jax/compilation_cache/cache_retrieval_time_sec": "of which cache reads"}
_jax_s, _jax_n = collections.Counter(), collections.Counter()
_compile_by_name = collections.Counter()  # compile (or cache read) seconds per program name
_maps = collections.Counter()  # the most memory maps at a module's end; times dropped


def _on_jax_duration(event, secs, fun_name=None, **_):
  if event in JAX_TIME:
    _jax_s[event] += secs
    _jax_n[event] += 1
  if event == "/jax/core/compile/backend_compile_duration" and fun_name:
    _compile_by_name[fun_name] += secs


jax.monitoring.register_event_duration_secs_listener(_on_jax_duration)


USER_CACHE = os.path.join(os.path.expanduser("~"), ".cache", "depthscale")
_started = {}


def written_since(root: str, since: float) -> list[str]:
  """Files under `root` modified after `since`."""
  return [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs
          if os.path.getmtime(os.path.join(d, f)) > since]


def pytest_configure(config):
  _started["t"] = time.time()
  if not os.environ.get("PYTEST_XDIST_WORKER"):  # the workers inherit it
    os.environ["DEPTHSCALE_TEST_JAX_TIME"] = tempfile.mkdtemp(prefix="jax-time-")


def pytest_sessionfinish(session):
  if not os.environ.get("PYTEST_XDIST_WORKER") and (
      new := written_since(USER_CACHE, _started["t"])):
    # a process a test started without the suite's caches (an environment read before
    # the suite set them): it compiled afresh and wrote into the user's home
    print(f"\nconftest: the tests wrote {len(new)} file(s) into {USER_CACHE}, e.g. {new[0]}; "
          "start processes with os.environ as it is at the test's run", file=sys.stderr)
    session.exitstatus = 1
  out = os.environ.get("DEPTHSCALE_TEST_JAX_TIME")
  if out and os.path.isdir(out):
    name = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(os.path.join(out, f"{name}.json"), "w") as f:
      json.dump({"s": _jax_s, "n": _jax_n, "by_name": _compile_by_name, "maps": _maps}, f)


def pytest_terminal_summary(terminalreporter):
  out = os.environ.get("DEPTHSCALE_TEST_JAX_TIME")
  s, n = collections.Counter(_jax_s), collections.Counter(_jax_n)
  by_name, maps = collections.Counter(_compile_by_name), collections.Counter(_maps)
  for path in glob.glob(os.path.join(out or "", "gw*.json")):
    with open(path) as f:
      got = json.load(f)
    s.update(got["s"])
    n.update(got["n"])
    by_name.update(got["by_name"])
    maps = collections.Counter(peak=max(maps["peak"], got["maps"].get("peak", 0)),
                               dropped=maps["dropped"] + got["maps"].get("dropped", 0))
  if out and not os.environ.get("PYTEST_XDIST_WORKER"):
    shutil.rmtree(out, ignore_errors=True)
  if s:
    terminalreporter.write_line("JAX in the pytest processes (not their subprocesses): " + ", ".join(
        f"{what} {s[e]:.0f} s ({n[e]})" for e, what in JAX_TIME.items()))
    terminalreporter.write_line(
        f"Memory maps at a module's end: at most {maps['peak']} in a worker (the kernel's "
        f"limit is 65530); programs dropped {maps['dropped']} times past {MAX_MAPS}")
    terminalreporter.write_line("Compiling by program (s): " + ", ".join(
        f"{name} {secs:.0f}" for name, secs in by_name.most_common(8)))
