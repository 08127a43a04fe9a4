"""Issue 34's misuse cases beyond the task itself: damaged or foreign parts of a workdir,
a user's own directory, resources asked for before they are checked, options a preset
does not use, output paths over a study or a workdir's files, and the SLURM launcher.
One table as tests/test_integrity.py (exit status 2, one line, no traceback, nothing
compiled, nothing changed); the launcher's rows through its own main, the probe cache's
damaged entries measured again.
"""
import importlib.util
import json
import os

import pytest

from depthscale import cli, config
from depthscale.io import leases, results_csv
from depthscale.sweep import probe, study as study_lib
from test_bad_inputs import COMPILES, snapshot
from test_integrity import LEASE, SMOKE, run_args, workdir
from test_task_contract_everywhere import refused

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

ROW = {c: 0 for c in results_csv.COLUMNS} | {"task": "khop", "depth": 1, "width": 32,
                                             "heads": 2, "seed": 0, "lr": 0.003,
                                             "length": 16, "repeats": 1, "n_star": 4}


def csv_text(rows=(ROW,), cut=False):
  text = ",".join(results_csv.COLUMNS) + "\n" + "".join(
      ",".join(str(r[c]) for c in results_csv.COLUMNS) + "\n" for r in rows)
  return text[:-40] if cut else text


def claims_config(kind):
  """config.json of the smoke study with one claim of `kind`."""
  c = config.load(SMOKE)
  with c.unlocked():
    c.report.claims = [dict(kind=kind, claim="x")]
  return c.to_json_best_effort()


def users_own_directory(tmp, _mp):
  os.makedirs(tmp / "w")
  (tmp / "w" / "report.md").write_text("my notes\n")
  (tmp / "w" / "results.csv").write_text("a,b\n1,2\n")
  return run_args()(tmp, _mp)


def lease(**fields):
  rec = dict(owner="w", host="h", pid=1, started=0.0, heartbeat=0.0, step=None,
             steps_per_s=None, total_steps=None, released=False) | fields
  return json.dumps(rec)


def cmd(*args):
  return lambda *_: {"args": list(args)}


def plan_json_over(name):
  def setup(tmp, mp):
    got = workdir(command="status")(tmp, mp)
    return {"args": ["plan", "--config", SMOKE, "--no-probe", "--json",
                     str(tmp / "w" / name)]}
  return setup


def plan_json_over_study(tmp, _mp):
  study = tmp / "study.py"
  study.write_text(open(os.path.join(ROOT, "experiments", "quickstart.py")).read())
  return {"args": ["plan", "--config", SMOKE, "--no-probe", "--json", str(study)]}


def compiled_memory_over_the_limit(tmp, mp):
  """Fits the parameter estimate, not the compiled program (measured here as 1 TB)."""
  mp.setattr(probe, "measure_memory", lambda *_: 2**40)
  return run_args("--config.plan.device_memory_gb=1")(tmp, mp)


BENCH_JSON = "/tmp/depthscale-test-never-written.json"

# (name, words the one line must contain, setup)
ROWS = [
    # damaged or foreign parts of a workdir
    ("a cut results.csv (report)", ["results.csv is damaged", "line 2"],
     workdir(plan_json=False, files={"results.csv": csv_text(cut=True)}, command="report")),
    ("results.csv without the columns (report)", ["results.csv is damaged or not depthscale's"],
     workdir(plan_json=False, files={"results.csv": "a,b\n1,2\n"}, command="report")),
    ("results.csv is a directory", ["results.csv is a directory"],
     workdir(files={"results.csv/x": "x"})),
    ("results.csv is a directory (report)", ["results.csv is a directory"],
     workdir(files={"results.csv/x": "x"}, command="report")),
    ("`plots` is a file (report)", ["plots is a file"],
     workdir(plan_json=False, files={"plots": "x", "results.csv": csv_text()},
             command="report")),
    ("an orphan results.csv under a plan (report)", ["results.csv holds 1 rows",
                                                     "no group of plan.json has finished"],
     workdir(files={"results.csv": csv_text()}, command="report")),
    ("an unknown claim kind in config.json (report)", ["config.json: report.claims[0]", "'nope'"],
     workdir(config_json=claims_config("nope"), plan_json=False,
             files={"results.csv": csv_text()}, command="report")),
    ("a lease with text slots (status)", ["not a depthscale lease record", "slots"],
     workdir(files={LEASE: lease(slots="four")}, command="status")),
    ("a lease with slots missing counts (status)", ["not a depthscale lease record", "slots"],
     workdir(files={LEASE: lease(slots={"busy": 1})}, command="status")),
    ("a lease with a text step (status)", ["not a depthscale lease record", "step = 'ten'"],
     workdir(files={LEASE: lease(step="ten")}, command="status")),
    ("a lease with a float pid", ["not a depthscale lease record", "pid = 1.5"],
     workdir(files={LEASE: lease(pid=1.5)})),
    ("a lease with a bool heartbeat", ["not a depthscale lease record", "heartbeat = True"],
     workdir(files={LEASE: lease(heartbeat=True)})),
    ("run into a user's own directory", ["not a depthscale workdir", "nothing of yours"],
     users_own_directory),
    ("report of a user's own results.csv", ["results.csv is damaged or not depthscale's"],
     lambda tmp, mp: {**users_own_directory(tmp, mp), "args": ["report", str(tmp / "w")]}),
    # resources asked for before they are checked
    ("train.steps = 10^12", ["train.steps", "2^31 - 1"],
     run_args("--config.train.steps=1000000000000")),
    ("train.warmup = 10^12", ["train.warmup", "2^31 - 1"],
     run_args("--config.train.warmup=1000000000000")),
    ("tasks show --length 10^11", ["seq_len(100000000000)", "smaller length"],
     cmd("tasks", "show", "khop", "--length", "100000000000")),
    ("a length of 10^11 in the grid", ["seq_len(100000000000)", "smaller length"],
     run_args("--config.grid.length=[100000000000]")),
    ("a word problem over Z1000xZ5", ["Z1000xZ5", "5000 elements", "smaller group"],
     cmd("tasks", "show", "word_problem", "--group=Z1000xZ5")),
    ("a word problem over Z1000xZ5 (run)", ["Z1000xZ5", "smaller group"],
     run_args("--config.task=word_problem", "--config.task_options={'group': 'Z1000xZ5'}",
              "--config.grid.length=[8]")),
    ("the memory fit fails after the probe (before the workdir is written)",
     ["plan.device_memory_gb", "even with remat"], compiled_memory_over_the_limit),
    # options a preset does not use; bounds
    ("bench refill --dtype", ["--preset refill does not use --dtype"],
     cmd("bench", "--preset", "refill", "--dtype", "bfloat16", "--json", BENCH_JSON)),
    ("bench mixed --models", ["--preset mixed does not use --models"],
     cmd("bench", "--preset", "mixed", "--models", "8", "--json", BENCH_JSON)),
    ("bench halving --devices", ["--preset halving does not use --devices"],
     cmd("bench", "--preset", "halving", "--devices", "1", "--json", BENCH_JSON)),
    ("bench --models 2^42", ["--models", "up to 65536"],
     cmd("bench", "--preset", "tiny", "--models", str(2**42), "--json", BENCH_JSON)),
    # output paths
    ("plan --json over a study file", ["would overwrite a Python file"], plan_json_over_study),
    ("plan --json over a workdir's config.json", ["workdir's own file"],
     plan_json_over("config.json")),
    ("plan --json over a workdir's results.csv", ["workdir's own file"],
     plan_json_over("results.csv")),
]


def test_at_least_25_rows():
  assert len(ROWS) >= 25 and len({r[0] for r in ROWS}) == len(ROWS)


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_refused_in_one_line_and_nothing_changed(row, tmp_path, monkeypatch, capsys):
  name, words, setup = row
  monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
  got = setup(tmp_path, monkeypatch)
  refused(got["args"], words, str(tmp_path), monkeypatch, capsys)
  assert not os.path.exists(BENCH_JSON)


def _slurm():
  """launch/slurm.py as a module (it is a script, not in a package)."""
  spec = importlib.util.spec_from_file_location("slurm_launcher",
                                                os.path.join(ROOT, "launch", "slurm.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def _another_study(tmp):
  study_lib.claim_workdir(study_lib.resolve(config.load("experiments/a5_depth.py:smoke")),
                          str(tmp / "w"))


SLURM = _slurm()  # loaded once, at collection: not inside a test's captured output

SLURM_ROWS = [
    ("not a number", ["--tasks/--shards", "invalid int value"], ["--tasks", "x"], None),
    ("--shards 10^9", ["--tasks 1000000000", "[0, 100000]"], ["--shards", "1000000000"], None),
    ("--timeout-min -5", ["--timeout-min -5", "[1, 527040]"], ["--timeout-min", "-5"], None),
    ("--gpus-per-node -1", ["--gpus-per-node -1"], ["--gpus-per-node", "-1"], None),
    ("--mem-gb 0", ["--mem-gb 0"], ["--mem-gb", "0"], None),
    ("unknown option", ["unrecognized argument '--bogus'"], ["--bogus"], None),
    ("a workdir that is a file", ["is a file"], [], lambda t: (t / "w").write_text("x")),
    ("a workdir of another study", ["holds a different study"], [], _another_study),
]


@pytest.mark.parametrize("row", SLURM_ROWS, ids=[r[0] for r in SLURM_ROWS])
def test_slurm_launcher_refuses_in_one_line(row, tmp_path, capsys):
  name, words, extra, setup = row
  if setup:
    setup(tmp_path)
  before, compiles = snapshot(str(tmp_path)), len(COMPILES)
  capsys.readouterr()
  rc = SLURM.main(["--config", SMOKE, "--workdir", str(tmp_path / "w"), "--dry-run",
                      *extra])
  out, err = capsys.readouterr()
  assert rc == 2, (name, out, err)
  lines = err.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith("slurm.py: error: "), err
  for w in words:
    assert w in lines[0], (name, w, lines[0])
  assert out == "" and snapshot(str(tmp_path)) == before and len(COMPILES) == compiles


def test_slurm_dry_run_writes_nothing(tmp_path, capsys):
  assert SLURM.main(["--config", SMOKE, "--workdir", str(tmp_path / "w"), "--dry-run"]) == 0
  assert "groups -> array of" in capsys.readouterr().out
  assert not os.path.exists(tmp_path / "w")


@pytest.mark.parametrize("field,value", [("step_s", "fast"), ("step_s", 0),
                                         ("memory_bytes", -1), ("devices", True)])
def test_a_damaged_probe_cache_entry_is_measured_again(field, value, tmp_path, monkeypatch):
  monkeypatch.setenv("DEPTHSCALE_CACHE", str(tmp_path))
  good = probe.Probe(compile_s=1.0, step_s=0.01, memory_bytes=10, device_kind="cpu",
                     devices=1)
  probe.store("sig", good)
  assert probe.cached("sig") == good
  entry = json.load(open(tmp_path / "probes" / "sig.json")) | {field: value}
  (tmp_path / "probes" / "sig.json").write_text(json.dumps(entry))
  assert probe.cached("sig") is None  # a miss: probed again and overwritten


def test_every_lease_field_a_worker_writes_passes_the_check():
  assert leases._bad_field(json.loads(lease(step=5, steps_per_s=2.5, total_steps=60,
                                            slots=dict(busy=1, slots=2, queued=0,
                                                       stopped=1, steps_left=9)))) is None


def test_a_results_csv_alone_is_still_reported(tmp_path, capsys):
  """A results.csv copied without its workdir (no config.json, no plan) is reported."""
  w = tmp_path / "copy"
  w.mkdir()
  (w / "results.csv").write_text(csv_text([ROW, ROW | {"depth": 2, "n_star": 8}]))
  assert cli.main(["report", str(w)]) == 0, capsys.readouterr().err
  assert "results.csv" in (w / "report.md").read_text()
