"""A user's task is held to its contract at every command, not only `tasks check`: a task
that breaks it is refused in one line by run, plan, status, report and `tasks show`,
with exit status 2, no traceback, nothing compiled and the workdir unchanged (one table,
one row per kind). Also: a task file that calls sys.exit or is interrupted at import, a
task file edited under a workdir's trained models, `~` in a task path, an entry point
named like a built-in.

Each row runs the command in-process; a listener on JAX's backend-compile event counts
compilations, and the training entry point is replaced by one that fails the test.
"""
import json
import os
import shutil
import sys
import textwrap

import jax.monitoring
import pytest

from depthscale import cli, config, tasks
from depthscale.io import workdir as workdir_lib
from depthscale.sweep import plan as plan_lib, runner, study as study_lib
from test_bad_inputs import COMPILES, snapshot

SMOKE = "experiments/quickstart.py:smoke"

GOOD = '''
import jax, jax.numpy as jnp
from depthscale import tasks
from depthscale.tasks import Batch

class T(tasks.Task):
  """A running sum mod 3."""
  def __init__(self):
    self._options, self.name, self.loss = {}, "good", "xent"
    self.input_vocab, self.input_dim, self.default_length = 3, None, 12
  def output_dim(self, length):
    return 3
  def seq_len(self, length):
    return length
  def sample(self, key, batch_size, length):
    x = jax.random.randint(key, (batch_size, length), 0, 3)
    return Batch(x, jnp.cumsum(x, axis=1) % 3, jnp.ones((batch_size, length), bool))
  def decode(self, batch, i):
    return {"x": [int(v) for v in batch.inputs[i]]}
'''


def variant(body: str) -> str:
  """GOOD with a subclass B that overrides what `body` defines."""
  return GOOD + "\nclass B(T):\n" + textwrap.indent(textwrap.dedent(body), "  ")


# (name, task file text, class, words the one-line error must contain)
BROKEN = [
    ("sample of the wrong shape", variant("def seq_len(self, length):\n  return length + 1"),
     "B", ["inputs has shape", "expected"]),
    ("measures key typo", variant('''
        def measure_names(self, length):
          return ("acc",)
        def measures(self, out, batch):
          return {"acc_": out.mean()}'''), "B", ["measures returned ['acc_']", "['acc']"]),
    ("float output_dim", variant("def output_dim(self, length):\n  return 3.0"), "B",
     ["output_dim(16) = 3.0", "not an int"]),
    ("absurd output_dim", variant("def output_dim(self, length):\n  return 10**9"), "B",
     ["output_dim(16) = 1000000000"]),
    ("no default_length", variant('''
        def __init__(self):
          super().__init__()
          del self.default_length'''), "B", ["default_length"]),
    ("no _options", variant('''
        def __init__(self):
          self.name, self.loss, self.input_vocab, self.input_dim = "b", "xent", 3, None
          self.default_length = 12'''), "B", ["options() raised", "super().__init__()"]),
    ("check_length raises ValueError", variant('''
        def check_length(self, length):
          raise ValueError(f"length {length} is not a multiple of 5")'''), "B",
     ["grid.length", "not a multiple of 5"]),
    ("check_length raises TypeError", variant('''
        def check_length(self, length):
          raise TypeError("boom")'''), "B", ["check_length(16) raised TypeError"]),
    ("sample returns a tuple", variant('''
        def sample(self, key, batch_size, length):
          b = super().sample(key, batch_size, length)
          return (b.inputs, b.targets, b.mask)'''), "B", ["sample returned tuple"]),
    ("float inputs for a token task", variant('''
        def sample(self, key, batch_size, length):
          b = super().sample(key, batch_size, length)
          return b.replace(inputs=b.inputs.astype(jnp.float32))'''), "B",
     ["inputs has dtype float32"]),
    ("sample not traceable", variant('''
        def sample(self, key, batch_size, length):
          b = super().sample(key, batch_size, length)
          if int(b.inputs[0, 0]) < 5:
            return b
          return b'''), "B", ["sample is not jittable"]),
    ("loss typo", variant('''
        def __init__(self):
          super().__init__()
          self.loss = "xnet"'''), "B", ["loss is 'xnet'"]),
    ("scaled_by typo", variant('''
        def __init__(self):
          super().__init__()
          self.scaled_by = "nstar"'''), "B", ["scaled_by='nstar'"]),
    ("measure_names a string", variant('''
        def measure_names(self, length):
          return "acc"'''), "B", ["measure_names(16) = 'acc'"]),
    ("absurd input_vocab", variant('''
        def __init__(self):
          super().__init__()
          self.input_vocab = 10**9'''), "B", ["input_vocab=1000000000"]),
    ("no name", variant('''
        def __init__(self):
          super().__init__()
          self.name = None'''), "B", ["name is not set"]),
    ("options not a dict", variant('''
        def options(self):
          return [1, 2]'''), "B", ["options() returned [1, 2]"]),
    ("sys.exit at import", GOOD + "\nimport sys\nsys.exit(0)\n", "T", ["sys.exit(0)"]),
    ("KeyboardInterrupt at import", GOOD + "\nraise KeyboardInterrupt\n", "T",
     ["KeyboardInterrupt"]),
]


def _workdir_of(tmp_path, task):
  """A workdir made by `run` of the smoke study over `task` (before the file broke)."""
  w = str(tmp_path / "w")
  c = config.load(SMOKE, [f"task={task}", "task_options={}"])
  study_lib.claim_workdir(study_lib.resolve(c), w)
  return w


def refused(argv, words, watch, monkeypatch, capsys, samples=False):
  """`argv` refused in one line naming `words`, nothing written, nothing compiled (unless
  the command `samples` before it can tell: `tasks show` decodes sampled examples)."""
  def no_training(*_a, **_k):
    raise AssertionError(f"{argv}: accepted, training started")
  monkeypatch.setattr(runner, "train_group", no_training)
  before, compiles = snapshot(watch), len(COMPILES)
  capsys.readouterr()
  rc = cli.main(argv)
  out, err = capsys.readouterr()
  assert rc == 2, (argv, out, err)
  lines = err.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith("depthscale: error: "), err
  assert "Traceback" not in out + err
  for w in words:
    assert w in lines[0], (w, lines[0])
  assert snapshot(watch) == before  # nothing written or removed
  assert samples or len(COMPILES) == compiles  # nothing compiled
  return lines[0]


COMMANDS = ["run", "plan", "tasks show", "status"]  # report reads files, not the task


def test_at_least_40_rows():
  assert len(BROKEN) * 2 + len(COMMANDS) * 3 >= 40


@pytest.mark.parametrize("row", BROKEN, ids=[r[0] for r in BROKEN])
@pytest.mark.parametrize("command", ["run", "plan"])
def test_a_broken_task_is_refused_by_run_and_plan(row, command, tmp_path, monkeypatch,
                                                    capsys):
  name, text, cls, words = row
  path = tmp_path / "t.py"
  path.write_text(text)
  w = str(tmp_path / "w")
  extra = ["--workdir", w, "--no-progress"] if command == "run" else ["--no-probe"]
  refused([command, "--config", SMOKE, f"--config.task={path}:{cls}",
            "--config.task_options={}", *extra], words, str(tmp_path), monkeypatch, capsys)


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("row", [BROKEN[0], BROKEN[4], BROKEN[17]], ids=["shape", "default",
                                                                      "exit"])
def test_a_task_broken_after_the_run_is_refused_by_every_command(row, command, tmp_path,
                                                                  monkeypatch, capsys):
  """The workdir was made with the good task; then the file broke."""
  name, text, cls, words = row
  path = tmp_path / "t.py"
  path.write_text(variant("pass") if cls == "B" else GOOD)
  w = _workdir_of(tmp_path, f"{path}:{cls}")
  path.write_text(text)
  tasks.sources._FILES.clear()  # a new process would read the file again
  argv = {"run": ["run", "--workdir", w, "--no-progress", "--config", SMOKE,
                  f"--config.task={path}:{cls}", "--config.task_options={}"],
          "plan": ["plan", "--no-probe", "--config", SMOKE, f"--config.task={path}:{cls}",
                   "--config.task_options={}"],
          "tasks show": ["tasks", "show", f"{path}:{cls}"],
          "status": ["status", w]}[command]
  if command == "tasks show" and cls == "B" and name == "no default_length":
    words = ["default_length"]
  refused(argv, words, str(tmp_path), monkeypatch, capsys)


@pytest.mark.parametrize("body,words", [
    ("def decode(self, batch, i):\n  return [1, 2]", ["decode(batch, 0) returned list"]),
    ("def decode(self, batch, i):\n  raise KeyError('x')", ["decode(batch, 0) raised KeyError"])])
def test_tasks_show_with_a_broken_decode_is_one_line(body, words, tmp_path, monkeypatch,
                                                      capsys):
  (tmp_path / "t.py").write_text(variant(body))
  line = refused(["tasks", "show", f"{tmp_path}/t.py:B", "-n", "1"], words, str(tmp_path),
                  monkeypatch, capsys, samples=True)
  assert line.startswith("depthscale: error: task B:")


@pytest.mark.parametrize("options,words", [("{1: 2}", ["task_options.1", "names are strings"]),
                                           ("None", ["task_options is a section"])])
def test_task_options_not_a_dict_is_one_line(options, words, tmp_path, monkeypatch, capsys):
  study = tmp_path / "s.py"
  study.write_text("from depthscale import config\ndef get_config(arg=None):\n"
                   f"  c = config.load({SMOKE!r})\n  c.task_options = {options}\n  return c\n")
  refused(["run", "--config", str(study), "--workdir", str(tmp_path / "w"), "--no-progress"],
           words, str(tmp_path), monkeypatch, capsys)


def test_an_edited_task_file_under_trained_models_isrefused(tmp_path, monkeypatch, capsys):
  path = tmp_path / "t.py"
  path.write_text(GOOD)
  w = _workdir_of(tmp_path, f"{path}:T")
  recorded = json.load(open(os.path.join(w, "config.json")))["task_digest"]
  assert recorded == tasks.digest(f"{path}:T") and recorded.startswith("sha256:")
  study = study_lib.load_saved(w)
  groups = plan_lib.make_plan(study)  # as `run` writes it (without the probe's timing)
  workdir_lib.write_plan_once(w, json.dumps(dict(format=1, device="cpu", devices=1,
                                                 groups=plan_lib.to_json(groups))))
  os.makedirs(os.path.join(w, "checkpoints", groups[0].id, "60"))  # a group has trained
  path.write_text(GOOD.replace("% 3, jnp.ones", "% 3 * 1, jnp.ones"))  # same API, new file
  tasks.sources._FILES.clear()
  line = refused(["run", "--workdir", w, "--no-progress", "--config", SMOKE,
                   f"--config.task={path}:T", "--config.task_options={}"],
                  [f"task {path} changed since workdir", "restore it, or use a new --workdir"],
                  str(tmp_path), monkeypatch, capsys)
  assert recorded[:19] in line


def test_an_edited_task_file_with_nothing_trained_takes_the_new_digest(tmp_path):
  path = tmp_path / "t.py"
  path.write_text(GOOD)
  w = _workdir_of(tmp_path, f"{path}:T")
  path.write_text(GOOD + "\n# edited\n")
  tasks.sources._FILES.clear()
  _workdir_of(tmp_path, f"{path}:T")  # accepted: no model trained on the old file
  assert json.load(open(os.path.join(w, "config.json")))["task_digest"] == tasks.digest(
      f"{path}:T")


def test_a_home_relative_task_path_is_stored_absolute(tmp_path, monkeypatch):
  monkeypatch.setenv("HOME", str(tmp_path))
  (tmp_path / "t.py").write_text(GOOD)
  c = config.load(SMOKE, ["task=~/t.py:T", "task_options={}"])
  assert c.task == f"{tmp_path}/t.py:T"


def test_an_entry_point_named_like_a_builtin_is_named(monkeypatch):
  class EP:
    name, value = "khop", "theirs.tasks:KHop"
  monkeypatch.setattr(tasks.sources, "entry_points", lambda: {"khop": EP()})
  with pytest.raises(tasks.UserError if hasattr(tasks, "UserError") else ValueError,
                     match="names both the built-in and the entry point 'khop'"):
    tasks.make("khop")


SALTED = GOOD.replace("import jax, jax.numpy as jnp", "import random\nimport jax, jax.numpy as jnp\n"
                      "SALT = random.randrange(1 << 30)").replace(
    "jax.random.randint(key,", "jax.random.randint(jax.random.fold_in(key, SALT),")


def test_tasks_check_runs_the_sampler_in_a_second_process(tmp_path, capsys):
  """A salt drawn once per process passes every check within one process."""
  path = tmp_path / "salted.py"
  path.write_text(SALTED)
  assert "SALT" in SALTED and "fold_in(key, SALT)" in SALTED
  from depthscale.tasks import contract
  assert contract.check(tasks.make(f"{path}:T"), 12) == []  # one process: clean
  capsys.readouterr()
  assert cli.main(["tasks", "check", f"{path}:T", "--no-cost"]) == 1
  out = capsys.readouterr().out
  assert "FAIL: sample differs between two processes for the same key" in out
  good = tmp_path / "good.py"
  good.write_text(GOOD)
  assert cli.main(["tasks", "check", f"{good}:T", "--no-cost"]) == 0
  assert "the task keeps the contract" in capsys.readouterr().out


def test_a_workdir_that_stored_a_home_relative_path_still_resumes(tmp_path, monkeypatch):
  """Before a7f872e (2026-11-26) config.json kept `~/t.py:T` as written; it is the same
  task."""
  monkeypatch.setenv("HOME", str(tmp_path))
  (tmp_path / "t.py").write_text(GOOD)
  w = _workdir_of(tmp_path, f"{tmp_path}/t.py:T")
  saved = json.load(open(os.path.join(w, "config.json")))
  saved["task"] = "~/t.py:T"
  with open(os.path.join(w, "config.json"), "w") as f:
    json.dump(saved, f)
  _workdir_of(tmp_path, "~/t.py:T")  # no "holds a different study"
  assert study_lib.load_saved(w).config.task == f"{tmp_path}/t.py:T"


def test_tasks_check_without_a_default_length_prints_fail_lines(tmp_path, capsys):
  (tmp_path / "t.py").write_text(BROKEN[4][1])
  assert BROKEN[4][0] == "no default_length"
  capsys.readouterr()
  assert cli.main(["tasks", "check", f"{tmp_path}/t.py:B", "--no-cost"]) == 1
  out = capsys.readouterr().out
  assert "FAIL: default_length=None" in out and "1 problem(s)" in out


def test_numpy_ints_keep_the_structural_contract(tmp_path):
  (tmp_path / "t.py").write_text(variant('''
      def output_dim(self, length):
        import numpy as np
        return np.int64(3)'''))
  from depthscale.tasks import structure
  assert structure.structural(tasks.make(f"{tmp_path}/t.py:B"), [8, 16]) == []


@pytest.mark.parametrize("command", ["check", "show"])
def test_a_tasks_own_length_refusal_reaches_the_user_in_one_line(command, tmp_path,
                                                                 monkeypatch, capsys):
  """`tasks check|show --length 5` on a task whose check_length raises ValueError: the
  task's own words, naming it, exit 2 (not a traceback)."""
  (tmp_path / "t.py").write_text(variant('''
      def check_length(self, length):
        if length % 2:
          raise ValueError("length must be even")'''))
  line = refused(["tasks", command, f"{tmp_path}/t.py:B", "--length", "5", "--no-cost"]
                 [: 6 if command == "check" else 5], ["task B refuses --length 5",
                                                      "length must be even"],
                 str(tmp_path), monkeypatch, capsys)
  assert line.count("length must be even") == 1


def test_tasks_list_names_an_entry_point_a_builtin_shadows(monkeypatch, capsys):
  """The built-in keeps its row (it works); the entry point gets its own row saying it is
  shadowed, how to reach it and what to rename."""
  class EP:
    name, value, dist = "khop", "theirs.tasks:KHop", None
  monkeypatch.setattr(tasks.sources, "entry_points", lambda: {"khop": EP()})
  capsys.readouterr()
  assert cli.main(["tasks", "list"]) == 0
  rows = [l for l in capsys.readouterr().out.splitlines() if l.startswith("khop ")]
  assert len(rows) == 2, rows
  assert "built-in" in rows[0] and "BROKEN" not in rows[0] and "k-hop" in rows[0]
  assert "entry point theirs.tasks:KHop" in rows[1] and "SHADOWED by the built-in 'khop'" \
      in rows[1] and "rename the entry point" in rows[1] and "theirs.tasks:KHop" in rows[1]


def _package(root, helper="MOD = 3\n"):
  """A task package of several modules: ptasks/task.py imports ptasks/helpers.py."""
  (root / "ptasks").mkdir(exist_ok=True)
  (root / "ptasks" / "__init__.py").write_text("")
  (root / "ptasks" / "helpers.py").write_text(helper)
  (root / "ptasks" / "task.py").write_text(
      GOOD.replace("% 3, jnp.ones", "% helpers.MOD, jnp.ones")
      .replace("from depthscale.tasks import Batch", "from depthscale.tasks import Batch\n"
               "from ptasks import helpers"))


def _forget_package():
  for name in [m for m in sys.modules if m == "ptasks" or m.startswith("ptasks.")]:
    del sys.modules[name]


@pytest.mark.parametrize("edit", ["helper", "task module"])
def test_a_package_tasks_digest_covers_its_sibling_modules(edit, tmp_path, monkeypatch,
                                                           capsys):
  """MODULE:CLASS in a package: the recorded digest covers every module of the package, so
  an edited helper the task imports is a changed task (refused under trained models), as
  an edited task module is; a package unchanged is the same digest."""
  _package(tmp_path)
  monkeypatch.syspath_prepend(str(tmp_path))
  _forget_package()
  spec = "ptasks.task:T"
  w = _workdir_of(tmp_path, spec)
  recorded = json.load(open(os.path.join(w, "config.json")))["task_digest"]
  assert recorded.startswith("sha256-pkg:") and recorded == tasks.digest(spec)
  assert recorded != tasks.digest(spec, single_file=True)
  study = study_lib.load_saved(w)
  groups = plan_lib.make_plan(study)
  workdir_lib.write_plan_once(w, json.dumps(dict(format=1, device="cpu", devices=1,
                                                 groups=plan_lib.to_json(groups))))
  os.makedirs(os.path.join(w, "checkpoints", groups[0].id, "60"))  # a group has trained
  if edit == "helper":
    (tmp_path / "ptasks" / "helpers.py").write_text("MOD = 3  # edited\n")
  else:
    (tmp_path / "ptasks" / "task.py").write_text(
        (tmp_path / "ptasks" / "task.py").read_text() + "\n# edited\n")
  _forget_package()
  line = refused(["run", "--workdir", w, "--no-progress", "--config", SMOKE,
                  f"--config.task={spec}", "--config.task_options={}"],
                 ["task ptasks.task changed since workdir", "restore it"],
                 str(tmp_path / "w"), monkeypatch, capsys)
  assert recorded[:19] in line
  _forget_package()


def test_a_workdir_that_recorded_a_package_modules_file_alone_still_resumes(tmp_path,
                                                                            monkeypatch):
  """Before packages were covered config.json held the module file's own sha256: the same
  file is the same task (its helpers were not recorded, so not held)."""
  _package(tmp_path)
  monkeypatch.syspath_prepend(str(tmp_path))
  _forget_package()
  spec = "ptasks.task:T"
  w = _workdir_of(tmp_path, spec)
  saved = json.load(open(os.path.join(w, "config.json")))
  saved["task_digest"] = tasks.digest(spec, single_file=True)
  with open(os.path.join(w, "config.json"), "w") as f:
    json.dump(saved, f)
  os.makedirs(os.path.join(w, "checkpoints", "g", "60"))  # has trained
  _workdir_of(tmp_path, spec)  # no "changed since"
  _forget_package()


@pytest.mark.parametrize("command", ["run", "status"])
def test_a_task_file_deleted_after_the_workdir_was_made_is_one_line(command, tmp_path,
                                                                     monkeypatch, capsys):
  """Round 4: the study's task file removed (or moved) under its workdir: `run` and
  `status` say which file is gone, in one line, and write nothing."""
  path = tmp_path / "t.py"
  path.write_text(GOOD)
  w = _workdir_of(tmp_path, f"{path}:T")
  os.remove(path)
  tasks.sources._FILES.clear()
  argv = {"run": ["run", "--workdir", w, "--no-progress", "--config", SMOKE,
                  f"--config.task={path}:T", "--config.task_options={}"],
          "status": ["status", w]}[command]
  refused(argv, [f"task file {path}: no such file"], str(tmp_path), monkeypatch, capsys)


def test_report_of_a_finished_workdir_needs_no_task_file(tmp_path, reference_run, capsys):
  """`report` reads results only: a finished workdir whose task file is gone (its config
  names a file that no longer exists) still gets its report, fits and claims."""
  ref, _ = reference_run
  w = tmp_path / "w"
  shutil.copytree(ref, w, ignore=shutil.ignore_patterns("checkpoints", "wandb"))
  cfg = json.loads((w / "config.json").read_text())
  cfg["task"] = f"{tmp_path}/gone.py:T"
  (w / "config.json").write_text(json.dumps(cfg))
  for name in ("report.md", "fits.json", "claims.json"):
    (w / name).unlink()
  capsys.readouterr()
  assert cli.main(["report", str(w)]) == 0, capsys.readouterr().err
  assert "Traceback" not in capsys.readouterr().err
  assert (w / "report.md").exists() and (w / "fits.json").exists()
  assert "## Settings" in (w / "report.md").read_text()
