"""Tests of the `depthscale` command line: printed examples, one-line user errors, exit codes.

The word-problem check recomputes running products of A5 in pure Python from the printed
inputs (no code shared with depthscale/tasks). No bench timing runs here.
"""
from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
import sys

import jax
import pytest

from depthscale import cli
from depthscale.bench import engine, shapes
from depthscale.cli import app, common
from depthscale.core import ensemble
from depthscale.sweep import plan, probe


def run_main(argv, capsys):
  rc = cli.main(argv)
  out, err = capsys.readouterr()
  return rc, out, err


def a5_elements():
  """Even permutations of 0..4 in lexicographic order (the task's documented ordering)."""
  def parity(p):
    return sum(p[i] > p[j] for i in range(5) for j in range(i + 1, 5)) % 2
  return [p for p in itertools.permutations(range(5)) if parity(p) == 0]


def parse_blocks(out: str) -> list[dict[str, list[int]]]:
  """The int lists of each `# example i` block, wrapped lines included."""
  blocks = out.split("# example ")[1:]
  parsed = []
  for block in blocks:
    fields = dict(re.findall(r"^(\w+): \[([^\]]*)\]", block, re.M | re.S))
    parsed.append({k: [int(v) for v in re.split(r",\s*", s.strip())] for k, s in fields.items()})
  return parsed


@pytest.mark.parametrize("argv", [["-n", "2"], ["-n", "2", "--length", "9", "--seed", "3"]])
def test_show_word_problem_prints_running_products(argv, capsys):
  rc, out, err = run_main(["tasks", "show", "word_problem", *argv], capsys)
  assert rc == 0 and err == ""
  examples = parse_blocks(out)
  assert len(examples) == 2
  elements = a5_elements()
  index = {p: i for i, p in enumerate(elements)}
  length = 9 if "--length" in argv else 128
  for ex in examples:
    assert len(ex["inputs"]) == len(ex["targets"]) == length
    state = tuple(range(5))
    for x, y in zip(ex["inputs"], ex["targets"]):
      g = elements[x]
      state = tuple(g[state[i]] for i in range(5))  # (a*b)[i] = b[a[i]]: apply a, then b
      assert y == index[state]
    assert ex["targets"][0] == ex["inputs"][0]


def test_show_options_and_rounding(capsys):
  rc, out, err = run_main(["tasks", "show", "retrieval", "-n", "1", "--length", "2",
                           "--chains=2", "--implicit-curriculum=false"], capsys)
  assert rc == 0 and err == ""
  assert "chains=2" in out and "implicit_curriculum=False" in out
  numbers = re.findall(r"-?\d+\.\d+", out.split("# example 0")[1])
  assert numbers and all(len(n.split(".")[1]) == 2 for n in numbers)


def test_tasks_list_names_every_task(capsys):
  rc, out, err = run_main(["tasks", "list"], capsys)
  assert rc == 0 and err == ""
  lines = out.strip().split("\n\n")[0].splitlines()
  assert sorted(line.split()[0] for line in lines) == sorted(
      ["word_problem", "khop", "reachability", "retrieval"])
  assert all(line.split()[1] == "built-in" for line in lines)  # where each comes from
  assert all(len(line.split(None, 2)) == 3 for line in lines)  # each has a description
  assert "FILE.py:CLASS or MODULE:CLASS" in out  # how to use one of your own


def test_parse_value():
  assert common.parse_value("3") == 3 and common.parse_value("0.5") == 0.5
  assert common.parse_value("True") is True and common.parse_value("false") is False
  assert common.parse_value("none") is None and common.parse_value("A5") == "A5"


BAD = {
    "unknown task": ["tasks", "show", "nope"],
    "bad option value": ["tasks", "show", "word_problem", "--group=A6"],
    "bad option value, spaced": ["tasks", "show", "word_problem", "--group", "A6"],
    "unknown option name": ["tasks", "show", "word_problem", "--grp=A5"],
    "option without value": ["tasks", "show", "word_problem", "--group"],
    "bad length": ["tasks", "show", "word_problem", "--length", "0"],
    "non-int length": ["tasks", "show", "word_problem", "--length", "x"],
    "no examples": ["tasks", "show", "word_problem", "-n", "0"],
    "bad preset": ["bench", "--preset", "huge", "--json", "out.json"],
    "missing json": ["bench", "--preset", "tiny"],
    "unwritable json": ["bench", "--preset", "tiny", "--json", "/nonexistent/dir/b.json"],
    "json is a directory": ["bench", "--preset", "tiny", "--json", "."],
    "negative chunk": ["bench", "--preset", "tiny", "--json", "b.json",
                       "--models-per-chunk", "-1"],
    "models not a multiple of 4": ["bench", "--preset", "tiny", "--json", "b.json",
                                   "--models", "6"],
    "bad dtype": ["bench", "--preset", "tiny", "--json", "b.json", "--dtype", "fp8"],
    "stray argument": ["tasks", "list", "--foo"],
    "no command": [],
    "override into a plain field": ["plan", "--config", "experiments/quickstart.py:smoke",
                                    "--config.task.name=x"],
    "override of an unknown field": ["plan", "--config", "experiments/quickstart.py:smoke",
                                     "--config.train.nope=1"],
    "report of a missing workdir": ["report", "/nonexistent/workdir"],
    "bad --devices": ["run", "--config", "experiments/quickstart.py:smoke", "--workdir",
                      "/nonexistent/w", "--devices", "0,x"],
    "repeated --devices": ["run", "--config", "experiments/quickstart.py:smoke", "--workdir",
                           "/nonexistent/w", "--devices", "1,1"],
    "status of a non-workdir": ["status", "/nonexistent/workdir"],
    "empty --json of plan": ["plan", "--config", "experiments/quickstart.py:smoke",
                             "--json", ""],  # wrote nothing and said nothing
    "empty --json of bench": ["bench", "--preset", "tiny", "--json", ""],  # failed at the end
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_user_errors_are_one_line(name, capsys):
  rc, out, err = run_main(BAD[name], capsys)
  assert rc == 2, name
  assert out == ""
  lines = err.splitlines()
  assert len(lines) == 1 and lines[0].startswith("depthscale: error: "), err
  assert "Traceback" not in err


# the line names what is wrong: a file given as the workdir, a directory as the study
# file, an option that names one thing given twice
WORDED = {
    "report of a file": (["report", "FILE"], ["is a file", "give the study's workdir"]),
    "status of a file": (["status", "FILE"], ["is a file", "give the study's workdir"]),
    "status of a missing workdir": (["status", "MISSING"], ["no such workdir"]),
    "a directory as the study file": (["plan", "--config", "DIR"], ["is a directory",
                                                                   "FILE.py[:ARG]"]),
    # the last one won, silently
    "two study files": (["plan", "--config", "experiments/quickstart.py:smoke", "--config",
                         "experiments/a5_depth.py:smoke"], ["--config given twice",
                                                            "a5_depth.py:smoke"]),
    "two workdirs": (["run", "--config", "experiments/quickstart.py:smoke", "--workdir",
                      "MISSING", "--workdir", "FILE"], ["--workdir given twice"]),
}


@pytest.mark.parametrize("name", sorted(WORDED))
def test_the_one_line_says_what_is_wrong(name, tmp_path, capsys):
  (tmp_path / "f").write_text("x")
  paths = {"FILE": str(tmp_path / "f"), "MISSING": str(tmp_path / "gone"), "DIR": str(tmp_path)}
  argv, words = WORDED[name]
  rc, _, err = run_main([paths.get(a, a) for a in argv], capsys)
  lines = err.splitlines()
  assert rc == 2 and len(lines) == 1 and lines[0].startswith("depthscale: error: "), err
  for w in words:
    assert w in lines[0], (w, lines[0])


@pytest.mark.parametrize("name", ["unknown task", "bad option value", "bad preset",
                                  "override into a plain field"])
def test_user_errors_exit_status_from_the_shell(name):
  proc = subprocess.run([sys.executable, "-m", "depthscale.cli", *BAD[name]],
                        capture_output=True, text=True, timeout=120)
  assert proc.returncode == 2
  lines = proc.stderr.splitlines()
  assert len(lines) == 1 and lines[0].startswith("depthscale: error: "), proc.stderr
  assert "Traceback" not in proc.stderr


# Ctrl-C sent by an import hook just before depthscale.cli.app loads (jax, flax: about a
# second), so that it lands while the modules load on any machine.
CTRL_C_WHILE_LOADING = """
import builtins, os, signal
signal.signal(signal.SIGINT, signal.default_int_handler)  # as from a terminal (a pytest-xdist
load = builtins.__import__                                 # worker's children ignore it)
def hook(name, *args, **kwargs):
  if name == "depthscale.cli.app":
    os.kill(os.getpid(), signal.SIGINT)
  return load(name, *args, **kwargs)
builtins.__import__ = hook
from depthscale.cli import main
main()
"""


def test_ctrl_c_while_the_modules_load_is_one_line():
  """Exit status 130 and one line, not a traceback through the imports."""
  proc = subprocess.run([sys.executable, "-c", CTRL_C_WHILE_LOADING, "tasks", "list"],
                        capture_output=True, text=True, timeout=120)
  assert proc.returncode == 130, proc.stderr[-2000:]
  assert proc.stderr.splitlines() == [
      "depthscale: interrupted while starting (nothing was run)"], proc.stderr[-2000:]


def test_bench_splits_a_cpu_into_one_device_per_core_unless_told(monkeypatch):
  cores = len(os.sched_getaffinity(0))
  monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=false")
  app.split_host_into_cores()
  assert os.environ["XLA_FLAGS"].split() == [
      "--xla_cpu_enable_fast_math=false", f"--xla_force_host_platform_device_count={cores}"]
  monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=3")
  app.split_host_into_cores()
  assert os.environ["XLA_FLAGS"] == "--xla_force_host_platform_device_count=3"


def test_bench_grid_is_seeds_by_learning_rates():
  specs = shapes.grid_specs(shapes.PRESETS["tiny"], 256)
  assert len(specs) == 256 and len({(s.seed, s.lr) for s in specs}) == 256
  assert {s.seed for s in specs} == set(range(64)) and {s.lr for s in specs} == set(shapes.LRS)


def test_flop_formula_by_hand():
  # tiny: P = 2 * (4 + 8) * 32^2 + 32 * 60 = 26496; 6 * P * (16 * 16) = 40697856;
  # attention 12 * 2 * 16^2 * 32 * 16 = 3145728.
  assert plan.matmul_params(2, 32, out_dim=60) == 26496
  assert engine.flops_per_model_step(depth=2, width=32, seq=16, batch=16, classes=60) == 43843584
  # medium: P = 4 * 12 * 256^2 + 256 * 60 = 3161088; 6 * P * 2048 = 38843449344;
  # attention 12 * 4 * 64^2 * 256 * 32 = 1610612736.
  assert engine.flops_per_model_step(4, 256, 64, 32, 60) == 38843449344 + 1610612736


def test_matmul_params_match_the_model():
  """The formula counts exactly the model's matmul kernels (no embedding, bias or norm)."""
  spec = ensemble.ModelSpec(depth=2, width=32, heads=4)
  cfg = ensemble.group_config([spec], max_len=16, output_dim=60, vocab=60)
  params = ensemble.init_params([spec], cfg)
  flat = {"/".join(str(getattr(k, "key", k)) for k in path): leaf
          for path, leaf in jax.tree_util.tree_leaves_with_path(params)}
  kernels = sum(leaf[0].size for name, leaf in flat.items()
                if name.endswith("kernel") and "embed" not in name)
  assert kernels == plan.matmul_params(2, 32, out_dim=60)


def test_override_into_a_plain_field_names_the_field(capsys):
  rc, _, err = run_main(BAD["override into a plain field"], capsys)
  assert rc == 2 and "task is a plain field" in err and "--config.task=VALUE" in err, err


@pytest.mark.parametrize("exc", [ValueError("shapes (3, 4) and (5,) do not broadcast"),
                                 AttributeError("'NoneType' object has no attribute 'x'")])
def test_a_library_bug_keeps_its_traceback(exc, monkeypatch, capsys):
  """Only UserError becomes one line: a ValueError raised inside the library (a shape
  error, an orbax tree mismatch) propagates with its traceback."""
  from depthscale.sweep import plan
  def broken(*args, **kwargs):
    raise exc
  monkeypatch.setattr(plan, "make_plan", broken)
  with pytest.raises(type(exc), match=re.escape(str(exc))):
    cli.main(["plan", "--config", "experiments/quickstart.py:smoke"])
  assert "depthscale: error" not in capsys.readouterr().err


def test_a_library_bug_exits_non_zero_with_a_traceback_from_the_shell():
  code = ("import sys; from depthscale import cli; from depthscale.sweep import plan\n"
          "def broken(*a, **k): raise ValueError('tree structures do not match')\n"
          "plan.make_plan = broken\n"
          "sys.exit(cli.main(['plan', '--config', 'experiments/quickstart.py:smoke']))")
  proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                        timeout=120)
  assert proc.returncode not in (0, 2), proc.stderr
  assert "Traceback" in proc.stderr and "tree structures do not match" in proc.stderr
  assert "depthscale: error" not in proc.stderr


@pytest.mark.parametrize("command", ["run", "plan"])
@pytest.mark.parametrize("platform", ["cuda", "tpu"])
def test_an_absent_jax_platform_is_one_line_and_nothing_is_written(command, platform,
                                                                    tmp_path):
  """JAX_PLATFORMS naming an accelerator this host lacks: one line saying what to change,
  exit 2, no workdir (jax's own failure is a bare AssertionError deep in its bridge)."""
  w = tmp_path / "w"
  args = {"run": ["--workdir", str(w), "--no-progress"], "plan": []}[command]
  proc = subprocess.run([sys.executable, "-m", "depthscale.cli", command, "--config",
                         "experiments/quickstart.py:smoke", *args],
                        env=dict(os.environ, JAX_PLATFORMS=platform), capture_output=True,
                        text=True, timeout=300)
  assert proc.returncode == 2, proc.stderr[-2000:]
  lines = proc.stderr.strip().splitlines()
  assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
  assert lines[0].startswith(f"depthscale: error: JAX_PLATFORMS={platform}: JAX cannot "
                             "start that platform here") and "unset JAX_PLATFORMS" in lines[0]
  assert not w.exists()


def test_home_unset_plan_and_report_work(tmp_path, reference_run):
  """HOME unset (a batch system's bare environment): the probe cache falls back to the
  user's home from the password database, and plan and report run as usual."""
  env = {k: v for k, v in os.environ.items() if k not in ("HOME", "DEPTHSCALE_CACHE")}
  plan = subprocess.run([sys.executable, "-m", "depthscale.cli", "plan", "--no-probe",
                         "--config", "experiments/quickstart.py:smoke"], env=env,
                        capture_output=True, text=True, timeout=300)
  assert plan.returncode == 0 and "Traceback" not in plan.stderr, plan.stderr[-2000:]
  assert "total:" in plan.stdout
  ref, _ = reference_run
  w = tmp_path / "w"
  shutil.copytree(ref, w, ignore=shutil.ignore_patterns("checkpoints", "wandb"))
  (w / "report.md").unlink()
  rep = subprocess.run([sys.executable, "-m", "depthscale.cli", "report", str(w)], env=env,
                       capture_output=True, text=True, timeout=300)
  assert rep.returncode == 0 and "Traceback" not in rep.stderr, rep.stderr[-2000:]
  assert (w / "report.md").exists()


def test_an_unwritable_probe_cache_is_one_line_and_probing_goes_on(monkeypatch, capsys):
  """DEPTHSCALE_CACHE (or ~/.cache) where nothing can be written: a probe is measured and
  used, the cache is named once in one line, and nothing is read back from it."""
  where = "/sys/depthscale-cache" if os.geteuid() == 0 else "/proc/depthscale-cache"
  monkeypatch.setenv("DEPTHSCALE_CACHE", where)
  monkeypatch.setattr(probe, "_UNWRITABLE", set())
  p = probe.Probe(compile_s=1.0, step_s=0.1, memory_bytes=10, device_kind="cpu", devices=1)
  capsys.readouterr()
  probe.store("abc", p)
  probe.store("def", p)
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and f"the probe cache {where}/probes is not writable" in err[0], err
  assert "DEPTHSCALE_CACHE" in err[0]
  assert probe.cached("abc") is None
