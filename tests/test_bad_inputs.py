"""Every bad input is refused in one line that names what to change, with exit status 2,
before anything compiles, and with the workdir unchanged (one table, one row per kind).

Each row runs `depthscale run` in-process; a listener on JAX's backend-compile event
counts compilations, and the training entry point is replaced by one that fails the test,
so a row that were accepted could not start a run.
"""
import errno
import json
import os
import shutil
import subprocess

import jax.monitoring
import pytest

from depthscale import cli, config
from depthscale.sweep import plan, runner, study as study_lib

COMPILES = []
jax.monitoring.register_event_duration_secs_listener(
    lambda event, _secs, **_: COMPILES.append(event)
    if event == "/jax/core/compile/backend_compile_duration" else None)

SMOKE = "experiments/quickstart.py:smoke"


def bad_config_file(body):
  def setup(tmp_path, _mp):
    path = tmp_path / "study.py"
    path.write_text(body)
    return {"config": str(path)}
  return setup


def workdir_file(tmp_path, _mp):
  (tmp_path / "w").write_text("not a directory\n")
  return {}


def workdir_unwritable(tmp_path, _mp):
  if os.geteuid() == 0:  # root writes anywhere but in sysfs
    return {"workdir": "/sys/depthscale-workdir"}
  locked = tmp_path / "locked"
  locked.mkdir(mode=0o500)
  return {"workdir": str(locked / "w")}


def workdir_dangling_link(tmp_path, _mp):
  os.symlink(tmp_path / "nowhere" / "x", tmp_path / "w")  # its target does not exist
  return {}


LOCKED = []  # directories made immutable by a row, made writable again after it


@pytest.fixture(autouse=True)
def unlock():
  yield
  while LOCKED:
    subprocess.run(["chattr", "-i", LOCKED.pop()], capture_output=True)


def lock(path, mp):
  """Make the directory `path` unwritable: chmod for a user, `chattr +i` for root (whom
  modes do not stop); where the filesystem has no immutable flag, os.mkdir (what a
  save and the writability probe create directories with) fails under it, as it would."""
  if os.geteuid() != 0:
    os.chmod(path, 0o500)
    return
  if shutil.which("chattr") and subprocess.run(["chattr", "+i", str(path)],
                                               capture_output=True).returncode == 0:
    LOCKED.append(str(path))
    return
  mkdir, inside = os.mkdir, str(path) + os.sep

  def refuse(p, *a, **k):
    if os.path.abspath(os.fspath(p)).startswith(inside):
      raise PermissionError(errno.EPERM, os.strerror(errno.EPERM), os.fspath(p))
    return mkdir(p, *a, **k)
  mp.setattr(os, "mkdir", refuse)


def checkpoints_unwritable(tmp_path, mp):
  study_lib.claim_workdir(study_lib.resolve(config.load(SMOKE)), str(tmp_path / "w"))
  os.makedirs(tmp_path / "w" / "checkpoints")
  lock(tmp_path / "w" / "checkpoints", mp)
  return {}


def group_checkpoints_unwritable(tmp_path, mp):
  """A group's checkpoint directory, holding a checkpoint, that cannot take the next."""
  study = study_lib.resolve(config.load(SMOKE))
  study_lib.claim_workdir(study, str(tmp_path / "w"))
  groups = plan.make_plan(study)
  (tmp_path / "w" / "plan.json").write_text(json.dumps(dict(
      format=1, device="cpu", devices=1, groups=plan.to_json(groups))))
  group = tmp_path / "w" / "checkpoints" / groups[0].id
  os.makedirs(group / "60")
  (group / "60" / "state").write_text("a saved step")
  lock(group, mp)
  return {}


def workdir_of_another_study(tmp_path, _mp):
  study_lib.claim_workdir(study_lib.resolve(config.load("experiments/a5_depth.py:smoke")), str(tmp_path / "w"))
  return {}


def workdir_of_a_grid_study(tmp_path, _mp):
  """The smoke study's workdir as a grid (its design is part of the workdir's identity)."""
  study_lib.claim_workdir(study_lib.resolve(config.load(SMOKE)), str(tmp_path / "w"))
  return {}


def workdir_with_group_file(text):
  def setup(tmp_path, _mp):
    study_lib.claim_workdir(study_lib.resolve(config.load(SMOKE)), str(tmp_path / "w"))
    os.makedirs(tmp_path / "w" / "groups")
    (tmp_path / "w" / "groups" / "n16-6m-0123456789.json").write_text(text)
    return {}
  return setup


def workdir_with_group_entry(make):
  """The smoke study's workdir with `make(path)` at a group file's path."""
  def setup(tmp_path, _mp):
    study_lib.claim_workdir(study_lib.resolve(config.load(SMOKE)), str(tmp_path / "w"))
    os.makedirs(tmp_path / "w" / "groups")
    make(tmp_path / "w" / "groups" / "n16-6m-0123456789.json")
    return {}
  return setup


def cuda_visible(_tmp_path, mp):
  mp.setenv("CUDA_VISIBLE_DEVICES", "0")
  return {}


# (name, extra arguments, words the one-line error must contain, optional setup)
ROWS = [
    ("unknown study argument", [], ["'smok'", "valid: control, solvable, cpu, gen, smoke"],
     lambda *_: {"config": "experiments/a5_depth.py:smok"}),
    ("contradicting study arguments", [], ["ic and nonic", "contradict"],
     lambda *_: {"config": "experiments/retrieval_layers.py:ic,nonic,smoke"}),
    ("unknown field", ["--config.train.nope=1"], ["train.nope", "unknown field", "valid"]),
    ("typo in a study file", [], ["'train.wramup'", "unknown field", "valid", "warmup"],
     bad_config_file("from depthscale import config\n"
                     "def get_config(arg=None):\n"
                     "  c = config.load('experiments/quickstart.py:smoke')\n"
                     "  c.train.wramup = 10\n"
                     "  return c\n")),
    ("typo in a study dict", [], ["'train.stpes'", "unknown field"],
     bad_config_file("def get_config(arg=None):\n  return {'train': {'stpes': 40}}\n")),
    ("override into a plain field", ["--config.task.name=x"], ["task is a plain field"]),
    ("wrong type", ["--config.train.steps=abc"], ["train.steps", "not of type int"]),
    ("wrong type in a list", ["--config.grid.lr=['fast']"], ["grid.lr", "positive"]),
    ("depth 0", ["--config.grid.depth=[0, 2]"], ["grid.depth", ">= 1"]),
    ("negative steps", ["--config.train.steps=-5"], ["train.steps"]),
    ("batch 0", ["--config.train.batch_size=0"], ["train.batch_size"]),
    ("threshold 0", ["--config.eval.threshold=0"], ["eval.threshold"]),
    ("threshold above 1", ["--config.eval.threshold=1.5"], ["eval.threshold", "(0, 1]"]),
    ("lr 0", ["--config.grid.lr=[0]"], ["grid.lr"]),
    ("negative lr", ["--config.grid.lr=[-0.001]"], ["grid.lr"]),
    ("negative lr_width", ["--config.grid.lr_width=-64"], ["grid.lr_width", "int >= 1"]),
    ("width not divisible by heads", ["--config.grid.width=[31]"], ["grid.width", "divisible"]),
    ("empty grid axis", ["--config.grid.seed=[]"], ["grid.seed", "non-empty"]),
    ("length the task cannot sample", ["--config.grid.length=[0]"], ["grid.length"]),
    ("steps not a multiple of steps_per_call", ["--config.train.steps=150"],
     ["train.steps", "steps_per_call"]),
    ("checkpoint_every not a multiple", ["--config.checkpoint_every=70"],
     ["checkpoint_every", "multiple"]),
    ("fixed curriculum without stages", ["--config.train.curriculum=fixed",
                                         "--config.train.steps_per_stage=0"],
     ["train.steps_per_stage"]),
    ("curriculum on a task without one", ["--config.train.curriculum=adaptive"],
     ["curriculum", "prefix-consistent"],
     lambda *_: {"config": "experiments/reachability_depth.py:smoke"}),
    ("length_max not past the grid's length", ["--config.train.length_max=16"],
     ["train.length_max", "grid's length is 16"]),
    ("length_max the task cannot sample", ["--config.train.length_max=2097152"],
     ["train.length_max", "cannot sample", "seq_len(2097152)"]),
    ("growth of a loss-measured task", ["--config.train.length_max=64"],
     ["train.length_max", "measured by loss"],
     lambda *_: {"config": "experiments/retrieval_layers.py:smoke"}),
    ("growth with a stopping rule", ["--config.train.length_max=64",
                                     "--config.train.stop=solved"],
     ["train.length_max", "stop=none"]),
    ("length_buckets not a bool", ["--config.train.length_buckets=2"],
     ["train.length_buckets"]),
    ("advance_at above 1", ["--config.train.advance_at=2"], ["train.advance_at", "(0, 1]"]),
    ("unknown stopping rule", ["--config.train.stop=early"], ["train.stop", "plateau"]),
    ("stop_every not a multiple", ["--config.train.stop=plateau", "--config.train.stop_every=30"],
     ["train.stop_every", "multiple"]),
    ("budget not a multiple of stop_every", ["--config.train.stop_every=200"],
     ["train.steps", "stop_every"]),
    ("patience below 1", ["--config.train.patience=0"], ["train.patience"]),
    ("negative slots", ["--config.train.slots=-1"], ["train.slots"]),
    ("fewer slots than compacted depths", ["--config.train.slots=2",
                                           "--config.plan.strategy=compact"],
     ["train.slots", "depths"]),
    ("halving over one learning rate", ["--config.train.stop=halving"],
     ["train.stop=halving", "grid.lr"]),
    ("halving with slots", ["--config.train.stop=halving", "--config.grid.lr=[0.001,0.003]",
                            "--config.train.slots=4"], ["train.slots", "halving"]),
    ("halving eta below 2", ["--config.train.stop=halving", "--config.grid.lr=[0.001,0.003]",
                             "--config.train.eta=1"], ["train.eta"]),
    ("halving rungs below stop_every", [
        "--config.train.stop=halving", "--config.grid.lr=[1e-4,2e-4,3e-4,4e-4,5e-4,6e-4,"
        "7e-4,8e-4,9e-4]", "--config.train.stop_every=100"], ["train.steps", "rung"]),
    ("halving over a setting split in two groups", [
        "--config.train.stop=halving", "--config.grid.lr=[0.001,0.003]",
        "--config.plan.max_models_per_group=1"], ["halving", "plan.max_models_per_group"]),
    ("unknown design kind", ["--config.design.kind=greedy"], ["design.kind", "grid, adaptive"]),
    ("adaptive design with halving", ["--config.design.kind=adaptive",
                                      "--config.train.stop=halving"],
     ["train.stop=halving", "design.kind=adaptive", "solved or plateau"]),
    ("adaptive design with no law to fit", ["--config.design.kind=adaptive",
                                             "--config.grid.depth=[2]"],
     ["design.kind=adaptive", "grid.depth", "at least 2 depths"]),
    ("adaptive design over two widths", ["--config.design.kind=adaptive",
                                         "--config.grid.width=[32, 64]"],
     ["design.kind=adaptive", "grid.width", "give one"]),
    ("design budget below its first round", ["--config.design.kind=adaptive",
                                             "--config.grid.seed=[0, 1, 2, 3]",
                                             "--config.design.budget=0.2"],
     ["design.budget", "first round's 0.33"]),
    ("design first round off the grid", ["--config.design.kind=adaptive",
                                         "--config.design.first=[1, 7]"],
     ["design.first", "7", "grid.depth"]),
    ("design max_seeds below the grid's", ["--config.design.kind=adaptive",
                                           "--config.grid.seed=[0, 1, 2]",
                                           "--config.design.max_seeds=2"],
     ["design.max_seeds", "grid's 3 seeds"]),
    ("design changed under trained models", ["--config.design.kind=adaptive",
                                             "--config.design.budget=1.0"],
     ["different study", "design"], lambda *_: workdir_of_a_grid_study(*_)),
    ("solved on a loss-measured task", ["--config.train.stop=solved"],
     ["train.stop", "loss", "plateau"],
     lambda *_: {"config": "experiments/retrieval_layers.py:smoke"}),
    ("unknown task option", ["--config.task_options.kk=1"], ["task_options.kk", "valid"]),
    ("bad task option value", ["--config.task_options.alphabet=1"], ["alphabet"]),
    ("config file missing", [], ["no such file"],
     lambda *_: {"config": "experiments/nope.py"}),
    ("config without get_config", [], ["has no get_config"],
     bad_config_file("X = 1\n")),
    ("config that raises", [], ["get_config failed", "RuntimeError", "boom"],
     bad_config_file("def get_config(arg=None):\n  raise RuntimeError('boom')\n")),
    ("workdir is a file", [], ["is a file"], workdir_file),
    ("workdir not writable", [], ["cannot write"], workdir_unwritable),
    ("workdir a dangling symlink", [], ["is a symlink to", "nowhere/x", "does not exist",
                                        "--workdir"], workdir_dangling_link),
    ("checkpoint directory not writable", [], ["w/checkpoints", "cannot be written",
                                               "writable", "--workdir"],
     checkpoints_unwritable),
    ("a group's checkpoint directory not writable", [],
     ["w/checkpoints/n16-", "cannot be written", "writable"],
     group_checkpoints_unwritable),
    ("workdir holds another study", [], ["different study"], workdir_of_another_study),
    ("corrupt group results", [], ["is corrupt", "move it aside"],
     workdir_with_group_file('{"rows": [{"n_star": 3')),
    ("group results of another version", [], ["another version of depthscale"],
     workdir_with_group_file('{"rows": [], "curves": {}, "per_position_acc": []}')),
    ("group results a directory", [], ["n16-6m-0123456789.json cannot be read",
                                       "Is a directory", "move it aside"],
     workdir_with_group_entry(os.mkdir)),
    ("group results a symlink to nowhere", [], ["cannot be read", "No such file",
                                                "move it aside"],
     workdir_with_group_entry(lambda p: os.symlink(p.parent / "gone.json", p))),
    ("group results edited to a non-number", [], ["has n_star 'abc', not a number",
                                                  "move it aside"],
     workdir_with_group_file('{"format": 2, "rows": [{"model": "m", "depth": 1, "width": 32, '
                             '"seed": 0, "n_star": "abc"}]}')),
    ("workdir empty", [], ["--workdir is empty"], lambda *_: {"workdir": ""}),
    ("workdir not UTF-8", [], ["--workdir", "is not UTF-8 text"],  # argv's bytes, as Python
     lambda tmp_path, _mp: {"workdir": str(tmp_path / "w\udcff\udcfe")}),  # decodes them
    ("group larger than the device memory limit", ["--config.plan.device_memory_gb=0.00001"],
     ["plan.device_memory_gb", "GB"]),
    ("unknown command-line option", ["--frobnicate"], ["--frobnicate"]),
    ("coordinator without processes", ["--coordinator", "localhost:1234"],
     ["--num-processes"]),
    ("--devices and CUDA_VISIBLE_DEVICES", ["--devices", "0"],
     ["--devices", "CUDA_VISIBLE_DEVICES"], cuda_visible),
    ("bad --devices", ["--devices", "0,x"], ["--devices"]),
    ("unknown model.pos", ["--config.model.pos=alibi"], ["model.pos", "valid"]),
    ("unknown model.compute_dtype", ["--config.model.compute_dtype=float16"],
     ["model.compute_dtype", "valid: float32, bfloat16"]),
    ("bfloat16 compute of float64 parameters", ["--config.model.compute_dtype=bfloat16",
                                                "--config.model.dtype=float64"],
     ["model.compute_dtype", "float64"]),
    ("unknown model.attention", ["--config.model.attention=flash"],
     ["model.attention", "valid: einsum, dot_product, cudnn, auto"]),
    ("unknown model.remat", ["--config.model.remat=full"], ["model.remat", "valid: none, block"]),
    ("lease_s 0", ["--config.lease_s=0"], ["lease_s"]),
]


def snapshot(path):
  if not os.path.exists(path):
    return None
  if os.path.isfile(path):
    return open(path, "rb").read()
  def read(p):  # a symlink as where it leads (it may lead nowhere)
    return ("link", os.readlink(p)) if os.path.islink(p) else open(p, "rb").read()
  return {os.path.join(r, f): read(os.path.join(r, f))
          for r, _, files in os.walk(path) for f in files} | {"dirs": sorted(
              os.path.join(r, d) for r, ds, _ in os.walk(path) for d in ds)}


def test_at_least_25_kinds_and_the_compile_counter_counts():
  assert len(ROWS) >= 25 and len({r[0] for r in ROWS}) == len(ROWS)
  import jax
  n = len(COMPILES)
  jax.jit(lambda x: x * 3 + 1)(jax.numpy.arange(7.0))
  assert len(COMPILES) > n  # the "nothing compiled" check below can fail


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_bad_input_is_refused_in_one_line_before_anything(row, tmp_path, monkeypatch, capsys):
  name, extra, words = row[:3]
  setup = row[3] if len(row) > 3 else (lambda *_: {})
  monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
  got = {"config": SMOKE, "workdir": str(tmp_path / "w"), **setup(tmp_path, monkeypatch)}

  def no_training(*_a, **_k):
    raise AssertionError(f"{name}: accepted, training started")
  monkeypatch.setattr(runner, "train_group", no_training)
  before, compiles = snapshot(got["workdir"]), len(COMPILES)
  capsys.readouterr()
  rc = cli.main(["run", "--config", got["config"], "--workdir", got["workdir"], "--no-progress",
                 *extra])
  out, err = capsys.readouterr()
  assert rc == 2, (name, err)
  lines = err.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith("depthscale: error: "), err
  for w in words:
    assert w in lines[0], (name, w, lines[0])
  assert snapshot(got["workdir"]) == before, name  # nothing written or removed
  assert len(COMPILES) == compiles, name  # nothing compiled


@pytest.mark.parametrize("command", ["status", "report"])
def test_status_and_report_of_a_dangling_symlink_are_one_line(command, tmp_path, capsys):
  os.symlink(tmp_path / "nowhere" / "x", tmp_path / "w")
  capsys.readouterr()
  rc = cli.main([command, str(tmp_path / "w")])
  err = capsys.readouterr().err.strip().splitlines()
  assert rc == 2 and len(err) == 1 and err[0].startswith("depthscale: error: "), err
  assert "is a symlink to" in err[0] and "nowhere/x" in err[0], err
  assert not os.path.lexists(tmp_path / "nowhere")


def test_a_checkpoint_directory_locked_during_a_run_is_one_line_and_keeps_the_last(
    tmp_path, monkeypatch):
  """`run` refuses an unwritable checkpoint directory before compiling (rows above); one
  made unwritable while it trains stops at the next save in one line, the last kept."""
  import numpy as np
  from depthscale.errors import UserError
  from depthscale.io.checkpoint import GroupCheckpoints
  ckpt = GroupCheckpoints(str(tmp_path / "ck"))
  try:
    ckpt.save(60, {"w": np.ones(3)})
    lock(tmp_path / "ck", monkeypatch)
    with pytest.raises(UserError) as e:
      ckpt.save(120, {"w": np.ones(3)})
  finally:
    ckpt.close()
  line = str(e.value)
  assert "\n" not in line and f"{tmp_path / 'ck'} cannot be written" in line, line
  assert "step-120 checkpoint was not saved" in line and "step-60 checkpoint is kept" in line
  assert os.listdir(tmp_path / "ck") == ["60"]
