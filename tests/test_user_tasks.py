"""A researcher's own task: from a file (every command finds it through config.json, no
wrapper), from an installed package's entry point, broken ones refused in one line;
`tasks check` catches each planted defect in one line; the tutorial's commands run as
written (docs/own_task.md)."""
import json
import os
import re
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import pytest

from depthscale import tasks
from depthscale.cli import main as cli_main
from depthscale.tasks import Batch, contract

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TUTORIAL = os.path.join(ROOT, "docs", "own_task.md")
def user_env(**extra) -> dict:
  """os.environ as it is when the test runs (with the suite's compilation and probe
  caches, which conftest sets once the test run starts: read at import, a process started
  here compiled everything afresh and kept its probes in ~/.cache), W&B off."""
  return dict(os.environ, WANDB_MODE="disabled", **extra)


def cli(*args, cwd=ROOT, env=None):
  return subprocess.run([sys.executable, "-m", "depthscale.cli", *args], cwd=cwd,
                        env=env or user_env(), capture_output=True, text=True, timeout=600)


def tutorial_files() -> dict[str, str]:
  """The tutorial's python blocks, by the file name on their first line."""
  text = open(TUTORIAL).read()
  blocks = re.findall(r"```python\n(.*?)```", text, re.S)
  return {b.splitlines()[0].lstrip("# ").strip(): b for b in blocks}


def tutorial_commands() -> list[str]:
  text = open(TUTORIAL).read()
  return [line for b in re.findall(r"```sh\n(.*?)```", text, re.S) for line in b.splitlines()
          if line.startswith("depthscale ")]


def write_tutorial(where) -> None:
  for name, body in tutorial_files().items():
    (where / name).write_text(body)


# A file task's study, run from elsewhere: the config names the task relative to itself.
STUDY = """
from depthscale import config
def get_config(arg=None):
  c = config.defaults()
  c.name = "own"
  c.task, c.task_options = "../tasks/dyck.py:BoundedDyck", {"max_depth": 3}
  c.grid.update(dict(depth=[1, 2], width=[16], seed=[0], lr=[3e-3], length=[8]))
  c.model.heads = 2
  c.train.update(dict(batch_size=8, steps=40, steps_per_call=20))
  c.checkpoint_every = 20
  c.eval.size = 64
  return c
"""


@pytest.mark.slow
def test_file_task_through_run_status_report_and_a_second_worker(tmp_path):
  (tmp_path / "tasks").mkdir()
  (tmp_path / "study").mkdir()
  (tmp_path / "elsewhere").mkdir()
  (tmp_path / "tasks" / "dyck.py").write_text(tutorial_files()["dyck.py"])
  (tmp_path / "study" / "own.py").write_text(STUDY)
  w = str(tmp_path / "w")
  p = cli("run", "--config", "../study/own.py", "--workdir", w, "--no-progress",
          cwd=tmp_path / "elsewhere")
  assert p.returncode == 0, p.stderr[-2000:]
  saved = json.load(open(os.path.join(w, "config.json")))
  assert saved["task"] == str(tmp_path / "tasks" / "dyck.py") + ":BoundedDyck"
  rows = open(os.path.join(w, "results.csv")).read().splitlines()
  assert len(rows) == 3 and rows[1].startswith("bounded_dyck,")
  # fresh processes that never ran the study file: all find the task through config.json
  st = cli("status", w, "--json", cwd=tmp_path)
  assert st.returncode == 0, st.stderr
  assert json.loads(st.stdout)["counts"]["done"] == 1
  os.remove(os.path.join(w, "report.md"))
  rp = cli("report", w, cwd="/")
  assert rp.returncode == 0 and os.path.exists(os.path.join(w, "report.md")), rp.stderr
  second = cli("run", "--config", str(tmp_path / "study" / "own.py"), "--workdir", w,
               "--no-progress", cwd="/")
  assert second.returncode == 0, second.stderr[-2000:]
  assert "0 to train" in second.stderr
  assert open(os.path.join(w, "results.csv")).read().splitlines() == rows
  # the file gone: one line naming it
  os.rename(tmp_path / "tasks" / "dyck.py", tmp_path / "tasks" / "moved.py")
  gone = cli("status", w)
  assert gone.returncode == 2 and "Traceback" not in gone.stderr
  assert gone.stderr.strip().count("\n") == 0, gone.stderr
  assert "dyck.py: no such file" in gone.stderr


BROKEN = {
    "syntax": ("def broken(:\n", "dyck.py failed to load: SyntaxError"),
    "import": ("import not_a_module_here\n", "failed to load: ModuleNotFoundError"),
    "no_class": ("X = 1\n", "has no 'BoundedDyck'"),
    "not_a_task": ("class BoundedDyck:\n  pass\n", "is not a subclass of depthscale.tasks.Task"),
    "abstract": ("from depthscale.tasks import Task\nclass BoundedDyck(Task):\n  pass\n",
                 "does not define decode, output_dim, sample, seq_len"),
    "constructor": ("from depthscale.tasks import Task\nclass BoundedDyck(Task):\n"
                    "  def __init__(self, **o):\n    raise RuntimeError('no GPU here')\n"
                    "  output_dim = seq_len = sample = decode = None\n",
                    "BoundedDyck() failed: RuntimeError: no GPU here"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_task_file_is_one_line(tmp_path, capfd, case):
  """In this process, every byte written to its stdout and stderr captured (the exit
  status from a shell, and a process's whole stderr: tests/test_cli.py's user errors)."""
  body, expected = BROKEN[case]
  (tmp_path / "dyck.py").write_text(body)
  (tmp_path / "own.py").write_text(STUDY.replace("../tasks/dyck.py", "dyck.py")
                                   .replace(', {"max_depth": 3}', ", {}"))
  rc = cli_main(["plan", "--config", str(tmp_path / "own.py"), "--no-probe"])
  out, err = capfd.readouterr()
  assert rc == 2 and out == "", (rc, out, err)
  assert "Traceback" not in err and err.strip().count("\n") == 0, err
  assert err.startswith("depthscale: error: ") and expected in err, err


ENTRY_POINT_PACKAGE = {
    "pyproject.toml": """
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"
[project]
name = "dyck-tasks"
version = "0.1"
[project.entry-points."depthscale.tasks"]
bounded_dyck = "dyck_tasks.dyck:BoundedDyck"
broken_task = "dyck_tasks.missing:Nothing"
[tool.setuptools]
packages = ["dyck_tasks"]
""",
    "dyck_tasks/__init__.py": "",
}


@pytest.mark.slow
def test_entry_point_task_from_an_installed_package(tmp_path):
  src, site = tmp_path / "src", tmp_path / "site"
  (src / "dyck_tasks").mkdir(parents=True)
  for name, body in ENTRY_POINT_PACKAGE.items():
    (src / name).write_text(textwrap.dedent(body))
  (src / "dyck_tasks" / "dyck.py").write_text(tutorial_files()["dyck.py"])
  pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                        "--no-build-isolation", "--no-index", "--target", str(site), str(src)],
                       capture_output=True, text=True, timeout=300)
  assert pip.returncode == 0, pip.stderr
  env = user_env(PYTHONPATH=str(site))
  listing = cli("tasks", "list", env=env)
  assert listing.returncode == 0, listing.stderr
  line = next(l for l in listing.stdout.splitlines() if l.startswith("bounded_dyck"))
  assert "entry point dyck_tasks.dyck:BoundedDyck (dyck-tasks)" in line
  assert "Brackets ( and )" in line
  assert "khop  " in listing.stdout and "built-in" in listing.stdout
  broken = next(l for l in listing.stdout.splitlines() if l.startswith("broken_task"))
  assert "BROKEN" in broken and "ModuleNotFoundError" in broken
  check = cli("tasks", "check", "bounded_dyck", "--max_depth=2", "--length=12", "--no-cost",
              env=env)
  assert check.returncode == 0, check.stdout + check.stderr
  assert "the task keeps the contract" in check.stdout
  plan = cli("plan", "--config", "experiments/quickstart.py:smoke", "--no-probe",
             "--config.task=bounded_dyck", "--config.task_options={}", env=env)
  assert plan.returncode == 0, plan.stderr[-2000:]


class Good(tasks.Task):
  """A running sum mod 3 (a correct task the defects below start from)."""

  def __init__(self):
    self._options, self.name, self.loss = {}, "good", "xent"
    self.input_vocab, self.input_dim, self.default_length = 3, None, 12
    self.prefix_consistent = True

  def output_dim(self, length):
    return 3

  def seq_len(self, length):
    return length

  def sample(self, key, batch_size, length):
    x = jax.random.randint(key, (batch_size, length), 0, 3)
    return Batch(x, jnp.cumsum(x, axis=1) % 3, jnp.ones((batch_size, length), bool))

  def decode(self, batch, i):
    return {"x": [int(v) for v in batch.inputs[i]], "y": [int(v) for v in batch.targets[i]]}


class Impure(Good):
  def sample(self, key, batch_size, length):
    import numpy as np
    x = jnp.asarray(np.random.randint(0, 3, (batch_size, length)), jnp.int32)
    return Batch(x, jnp.cumsum(x, axis=1) % 3, jnp.ones((batch_size, length), bool))


class WrongShape(Good):
  def seq_len(self, length):
    return length + 1


class FalsePrefix(Good):  # labels from the end of the string: not prefix-consistent
  def sample(self, key, batch_size, length):
    b = super().sample(key, batch_size, length)
    return b.replace(targets=jnp.cumsum(b.inputs[:, ::-1], axis=1)[:, ::-1] % 3)


class OutOfRange(Good):
  def sample(self, key, batch_size, length):
    b = super().sample(key, batch_size, length)
    return b.replace(targets=jnp.cumsum(b.inputs, axis=1))  # no "mod 3"


class IgnoresKey(Good):
  def sample(self, key, batch_size, length):
    return super().sample(jax.random.key(0), batch_size, length)


class NotJittable(Good):
  def sample(self, key, batch_size, length):
    b = super().sample(key, batch_size, length)
    if int(b.inputs[0, 0]) < 5:  # a Python branch on a traced value
      return b
    return b


class EmptyMask(Good):
  def sample(self, key, batch_size, length):
    b = super().sample(key, batch_size, length)
    return b.replace(mask=b.mask.at[0].set(False))


class BadMeasures(Good):
  def measure_names(self, length):
    return ("a", "b")

  def measures(self, out, batch):
    return {"a": out.mean()}


class ArrayDecode(Good):
  def decode(self, batch, i):
    return {"x": batch.inputs[i]}


DEFECTS = {
    Impure: "sample is not pure: the same key gave two different batches",
    WrongShape: "inputs has shape (8, 12), expected (8, 13)",
    FalsePrefix: "prefix_consistent=True is false",
    OutOfRange: "targets at masked positions span",
    IgnoresKey: "sample ignores its key",
    NotJittable: "sample is not jittable",
    EmptyMask: "1 of 8 examples have an empty mask",
    BadMeasures: "measures returned ['a'], measure_names(12) says ['a', 'b']",
    ArrayDecode: "decode(batch, 0) failed (TypeError",
}


def test_a_correct_task_and_every_builtin_keep_the_contract():
  assert contract.check(Good(), 12) == []
  for name, options, length in (("word_problem", dict(group="S3"), 8), ("khop", {}, 16),
                                ("reachability", {}, 8), ("retrieval", {}, 2)):
    assert contract.check(tasks.make(name, **options), length) == [], name


@pytest.mark.parametrize("defect", list(DEFECTS), ids=lambda c: c.__name__)
def test_tasks_check_catches_each_planted_defect_in_one_line(defect):
  problems = contract.check(defect(), 12)
  assert len(problems) == 1 and DEFECTS[defect] in problems[0], problems
  assert "\n" not in problems[0]


def test_tasks_check_command_on_a_planted_defect(tmp_path):
  """Through the CLI: exit 1, the problem on one FAIL line, nothing timed."""
  (tmp_path / "t.py").write_text(textwrap.dedent('''
      import jax, jax.numpy as jnp
      from depthscale.tasks import Batch, Task
      class Sum(Task):
        """Running sum mod 3, claimed prefix-consistent though labels come from the end."""
        def __init__(self):
          self._options, self.name, self.loss = {}, "sum", "xent"
          self.input_vocab, self.input_dim, self.default_length = 3, None, 10
          self.prefix_consistent = True
        def output_dim(self, length): return 3
        def seq_len(self, length): return length
        def sample(self, key, batch_size, length):
          x = jax.random.randint(key, (batch_size, length), 0, 3)
          y = jnp.cumsum(x[:, ::-1], axis=1)[:, ::-1] % 3
          return Batch(x, y, jnp.ones((batch_size, length), bool))
        def decode(self, batch, i): return {"x": [int(v) for v in batch.inputs[i]]}
      '''))
  p = cli("tasks", "check", "t.py:Sum", cwd=tmp_path)
  assert p.returncode == 1, p.stdout + p.stderr
  fails = [l for l in p.stdout.splitlines() if l.startswith("FAIL: ")]
  assert len(fails) == 1 and "prefix_consistent=True is false" in fails[0], p.stdout
  assert "sampling" not in p.stdout  # the cost is timed only for a task that passes


@pytest.mark.slow
def test_tutorial_commands_run_as_written(tmp_path):
  """docs/own_task.md's files and commands, in a directory of a user's own; the study at
  its :smoke size, 40 steps (the only change)."""
  write_tutorial(tmp_path)
  commands = tutorial_commands()
  assert len(commands) == 6, commands
  for command in commands:
    args = command.split()[1:]
    if "dyck_study.py" in args:  # smoke: 40 steps instead of :smoke's 300
      args = [a + ":smoke" if a == "dyck_study.py" else a for a in args] + [
          "--config.train.steps=40", "--config.checkpoint_every=20"]
    p = cli(*args, cwd=tmp_path)
    assert p.returncode == 0, (command, p.stdout[-2000:], p.stderr[-2000:])
    if args[:2] == ["tasks", "check"]:
      assert "the task keeps the contract" in p.stdout
  report = (tmp_path / "runs" / "dyck" / "report.md").read_text()
  assert "dyck.py:BoundedDyck" in report
  assert "bounded_dyck" in (tmp_path / "runs" / "dyck" / "results.csv").read_text()
