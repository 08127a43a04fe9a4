"""A workdir whose results can be trusted: the clumsy inputs and damaged files of issue 24,
one table (each row: exit status 2, one line naming what to change, no traceback,
nothing compiled, the workdir unchanged), then the double count and the seed collision.

Rows run the command in-process, like tests/test_bad_inputs.py (whose counter of
compilations and refusal of training this file reuses). A setup returns the command's
arguments (`args`) and optionally a `workdir` to snapshot.
"""
import json
import os

import pytest

from test_bad_inputs import COMPILES, snapshot
from depthscale import cli, config
from depthscale.io import places, workdir as workdir_lib
from depthscale.sweep import plan, runner, study as study_lib

SMOKE = "experiments/quickstart.py:smoke"


def run_args(*extra, config_path=SMOKE):
  return lambda tmp, _mp: {"args": ["run", "--config", config_path, "--workdir",
                                    str(tmp / "w"), "--no-progress", *extra]}


def config_file(body):
  """`run` on a study file holding `body` (a get_config)."""
  def setup(tmp, _mp):
    (tmp / "study.py").write_text(body)
    return run_args(config_path=str(tmp / "study.py"))(tmp, _mp)
  return setup


def get_config_returning(expr):
  return config_file(f"def get_config(arg=None):\n  return {expr}\n")


def workdir(*, config_json=None, plan_json=True, groups=(), files=(), command="run",
            extra=()):
  """A workdir of the smoke study made by hand (no training): config.json (or
  `config_json` as text), plan.json of the default plan (or `plan_json` text, or none),
  group files {name: text}, other files {relative path: text}; then `command` on it."""
  def setup(tmp, _mp):
    w = tmp / "w"
    study = study_lib.resolve(config.load(SMOKE))
    study_lib.claim_workdir(study, str(w))
    if config_json is not None:
      (w / "config.json").write_text(config_json)
    if plan_json is True:
      (w / "plan.json").write_text(json.dumps(
          dict(format=1, groups=plan.to_json(plan.make_plan(study)))))
    elif plan_json:
      (w / "plan.json").write_text(plan_json)
    for name, text in dict(groups).items():
      os.makedirs(w / "groups", exist_ok=True)
      (w / "groups" / name).write_text(text(study) if callable(text) else text)
    for rel, text in dict(files).items():
      os.makedirs((w / rel).parent, exist_ok=True)
      (w / rel).write_text(text)
    args = {"run": ["run", "--config", SMOKE, "--workdir", str(w), "--no-progress"],
            "status": ["status", str(w)], "report": ["report", str(w)]}[command]
    return {"args": args + list(extra)}
  return setup


def first_group(study):
  return plan.make_plan(study)[0]


def group_text(models=None):
  """A valid group file of the plan's first group (or holding `models` instead)."""
  def text(study):
    g = first_group(study)
    keys = models if models is not None else [x.key for x in g.cells]
    return json.dumps({"rows": [{"model": k, "n_star": 1} for k in keys], "curves": {},
                       "per_position_acc": [], "format": workdir_lib.FORMAT})
  return text


def first_group_file(study):
  return first_group(study).id + ".json"


def cache_is_file(tmp, mp):
  (tmp / "cache").write_text("x")
  mp.setenv("DEPTHSCALE_CACHE", str(tmp / "cache"))
  return run_args()(tmp, mp)


def long_name(n):
  return lambda tmp, _mp: {"args": ["run", "--config", SMOKE, "--workdir",
                                    str(tmp / ("w" * n)), "--no-progress"]}


def long_path(tmp, _mp):
  deep = os.path.join(str(tmp), *["d" * 200] * 21)  # 4200+ bytes, each name legal
  return {"args": ["run", "--config", SMOKE, "--workdir", deep, "--no-progress"]}


def stray_rows_group(tmp, mp):
  """A group file under the plan's first group id holding other models."""
  study = study_lib.resolve(config.load(SMOKE))
  return workdir(groups={first_group_file(study): group_text(["d9-w9"])})(tmp, mp)


def results_without_plan(tmp, mp):
  study = study_lib.resolve(config.load(SMOKE))
  return workdir(plan_json=False, groups={first_group_file(study): group_text()})(tmp, mp)


def config_removed_under_results(tmp, mp):
  """`report` of a workdir whose config.json is gone: on a trained workdir it wrote
  claims.json as [] and a report without the study's claims over the ones there (on this
  one's hand-made rows it failed with a KeyError)."""
  study = study_lib.resolve(config.load(SMOKE))
  got = workdir(groups={first_group_file(study): group_text()}, command="report")(tmp, mp)
  os.remove(tmp / "w" / "config.json")
  (tmp / "w" / "claims.json").write_text('[{"claim": "kept"}]')
  return got


def checkpoints_without_plan(tmp, mp):
  return workdir(plan_json=False, files={"checkpoints/n16-6m-0123456789/60/x": "x"})(tmp, mp)


def plan_changed_with_progress(tmp, mp):
  study = study_lib.resolve(config.load(SMOKE))
  got = workdir(groups={first_group_file(study): group_text()})(tmp, mp)
  return {"args": got["args"] + ["--config.plan.max_models_per_group=2"]}


def changed_with_progress(*overrides):
  """A workdir whose first group has trained, rerun with `overrides` (stopping or slot
  options changed under trained models)."""
  def setup(tmp, mp):
    study = study_lib.resolve(config.load(SMOKE))
    got = workdir(groups={first_group_file(study): group_text()})(tmp, mp)
    return {"args": got["args"] + list(overrides)}
  return setup


LEASE = "leases/n16-6m-0123456789.1"

# (name, words the one line must contain, setup)
ROWS = [
    # config files held to the rules of overrides
    ("get_config returns None", ["get_config returned NoneType", "ConfigDict or a dict"],
     get_config_returning("None")),
    ("get_config returns a list", ["get_config returned list"], get_config_returning("[1, 2]")),
    ("get_config returns a number", ["get_config returned int"], get_config_returning("3")),
    ("wrong-type value in a study dict", ["train", "type"],
     get_config_returning("{'train': {'steps': 'forty'}}")),
    ("a scalar where a list goes", ["grid.depth", "not of type list"],
     get_config_returning("{'grid': {'depth': 3}}")),
    ("a section given a scalar in a study dict", ["train"],
     get_config_returning("{'train': 5}")),
    ("non-finite lr in a study file", ["grid.lr", "finite"],
     get_config_returning("{'grid': {'lr': [float('inf')]}}")),
    ("NaN lr in a study file", ["grid.lr", "finite"],
     get_config_returning("{'grid': {'lr': [float('nan')]}}")),
    ("non-finite clip_norm in a study file", ["train.clip_norm"],
     get_config_returning("{'train': {'clip_norm': float('inf')}}")),
    ("config path not ending in .py", ["not a .py file"],
     lambda tmp, mp: run_args(config_path="README.md")(tmp, mp)),
    ("a whole section as an override", ["train is a section", "--config.train."],
     run_args("--config.train={'steps': 40}")),
    ("lr = inf", ["grid.lr", "finite"], run_args("--config.grid.lr=[1e999]")),
    ("seed 2^32 (the same model as seed 0)", ["grid.seed", "2^32", "seed 0"],
     run_args("--config.grid.seed=[0, 4294967296]")),
    ("seed 2^63", ["grid.seed", "[0, 2^32)"], run_args(f"--config.grid.seed=[{2**63}]")),
    ("a seed listed twice", ["grid.seed", "twice"], run_args("--config.grid.seed=[1, 1]")),
    ("an lr listed twice", ["grid.lr", "twice"], run_args("--config.grid.lr=[0.01, 0.01]")),
    ("lease_s = inf", ["lease_s", "finite"], run_args("--config.lease_s=1e999")),
    ("lease_s = 0.001", ["lease_s", "at least 2"], run_args("--config.lease_s=0.001")),
    ("batch of 10^9 examples", ["train.batch_size", "at most"],
     run_args("--config.train.batch_size=1000000000")),
    ("eval.size of 10^9", ["eval.size", "at most"], run_args("--config.eval.size=1000000000")),
    # command-line values bounded, before anything is allocated
    ("plan --workers 10^9", ["--workers", "[1, 100000]"],
     lambda *_: {"args": ["plan", "--config", SMOKE, "--no-probe", "--workers", "1000000000"]}),
    ("tasks show with a seed of 2^64", ["--seed", "2^32"],
     lambda *_: {"args": ["tasks", "show", "khop", "--seed", str(2**64)]}),
    ("--coordinator without a port", ["--coordinator", "HOST:PORT"],
     run_args("--num-processes", "2", "--coordinator", "localhost")),
    ("DEPTHSCALE_CACHE is a file", ["DEPTHSCALE_CACHE", "is a file"], cache_is_file),
    ("a workdir name over 255 bytes", ["255", "shorter --workdir"], long_name(300)),
    ("a workdir path over 4096 bytes", ["4096", "shorter --workdir"], long_path),
    # damaged or foreign workdir files: one line naming the file
    ("truncated config.json", ["config.json is damaged"], workdir(config_json='{"task": ')),
    ("config.json holding a list", ["config.json holds a list"], workdir(config_json="[]")),
    ("config.json of a foreign tool", ["config.json", "unknown field"],
     workdir(config_json='{"frobnicate": 1}', command="status")),
    ("truncated config.json (status)", ["config.json is damaged"],
     workdir(config_json='{"task": ', command="status")),
    ("plan.json holding a list", ["plan.json holds a list"], workdir(plan_json="[1]")),
    ("plan.json without groups", ["plan.json is not a depthscale plan"],
     workdir(plan_json='{"format": 1}')),
    ("plan.json without groups (status)", ["plan.json is not a depthscale plan"],
     workdir(plan_json='{"groups": 3}', command="status")),
    ("group file whose rows are not a list", ["is not a depthscale group result"],
     workdir(groups={"n16-6m-0123456789.json": '{"rows": 5, "format": 2}'})),
    ("group file holding other models than its group", ["holds other models"],
     stray_rows_group),
    ("lease file that parses but is not a lease", [LEASE, "not a depthscale lease record"],
     workdir(files={LEASE: "[1, 2, 3]"})),
    ("lease file with a text heartbeat (status)", [LEASE, "not a depthscale lease record"],
     workdir(files={LEASE: '{"heartbeat": "noon"}'}, command="status")),
    ("`groups` is a file", ["groups is a file", "move it aside"],
     workdir(files={"groups": "x"})),
    ("`leases` is a file", ["leases is a file"], workdir(files={"leases": "x"})),
    ("`checkpoints` is a file", ["checkpoints is a file"], workdir(files={"checkpoints": "x"})),
    ("a file where a group's checkpoints go", ["where a group's checkpoints go"],
     workdir(files={"checkpoints/n16-6m-0123456789": "x"})),
    # nothing counted twice: a grouping that changed under results is refused
    ("plan.json removed under results", ["plan.json is missing", "restore plan.json"],
     results_without_plan),
    ("plan.json removed under checkpoints", ["plan.json is missing"], checkpoints_without_plan),
    ("config.json removed under results (report)", ["config.json is missing",
                                                    "restore config.json"],
     config_removed_under_results),
    ("a plan field changed under results", ["different study", "plan"],
     plan_changed_with_progress),
    # stopping and slot options changed under trained models (issue 50, round 4)
    ("train.stop changed under results", ["different study", "train"],
     changed_with_progress("--config.train.stop=plateau")),
    ("train.slots changed under results", ["different study", "train"],
     changed_with_progress("--config.train.slots=2")),
    ("train.stop_every changed under results", ["different study", "train"],
     changed_with_progress("--config.train.stop_every=20")),
]


def test_at_least_30_new_kinds():
  assert len(ROWS) >= 30 and len({r[0] for r in ROWS}) == len(ROWS)


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_refused_in_one_line_and_nothing_changed(row, tmp_path, monkeypatch, capsys):
  name, words, setup = row
  monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
  got = setup(tmp_path, monkeypatch)
  watched = got.get("workdir", str(tmp_path))

  def no_training(*_a, **_k):
    raise AssertionError(f"{name}: accepted, training started")
  monkeypatch.setattr(runner, "train_group", no_training)
  before, compiles = snapshot(watched), len(COMPILES)
  capsys.readouterr()
  rc = cli.main(got["args"])
  _out, err = capsys.readouterr()
  assert rc == 2, (name, err)
  lines = err.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith("depthscale: error: "), err
  assert "Traceback" not in err
  for w in words:
    assert w in lines[0], (name, w, lines[0])
  assert snapshot(watched) == before, name  # nothing written or removed
  assert len(COMPILES) == compiles, name  # nothing compiled


@pytest.mark.parametrize("probe_is", ["there", "gone"])
def test_a_peers_write_probe_is_not_the_workdirs(tmp_path, probe_is):
  """Two workers starting on one workdir: each probes that its directories take writes by
  making and removing an empty directory in them (places.PROBE), so the other may list
  the name and find it gone a moment later (a fresh clone's test_workers failed so,
  "checkpoints/.depthscale-check-... is a file", 2026-11-29). Neither the probe, nor its
  name left without the directory, is a group's checkpoints or training done."""
  w = tmp_path / "w"
  for sub in ("groups", "checkpoints"):
    probe = w / sub / f"{places.PROBE}x7k2q"
    probe.parent.mkdir(parents=True)
    if probe_is == "there":
      probe.mkdir()
    else:  # listed, then removed by its worker: what the lister sees is not a directory
      probe.write_text("")
  workdir_lib.check_contents(str(w))  # no plan.json yet, as at a first start: not refused
  assert not workdir_lib.has_training(str(w))
  assert workdir_lib.entries(str(w / "checkpoints")) == []
