"""A resume that really resumes: through `depthscale run`, for the padded and the
compacted layout, a run stopped after a checkpoint is rerun; the rerun must say it
resumed from the checkpoint's step N (read from disk), execute exactly total - N
training steps (counted at the compiled program's entry), and end with the results of
an uninterrupted run. A restore that silently never happened trains all steps again
and fails the count, although its results would be the same (batches depend on
(seed, step) only)."""
import os

import pytest

from conftest import read_rows
from depthscale import cli
from depthscale.io import workdir as workdir_lib
from depthscale.sweep import runner, train_group

TOTAL = 120
ARGS = ["--config", "experiments/quickstart.py:smoke", "--no-progress",
        "--config.grid.depth=[1, 3]", "--config.grid.seed=[0]",
        f"--config.train.steps={TOTAL}", "--config.checkpoint_every=60"]


@pytest.fixture
def counted(monkeypatch):
  """Every training step executed by a group's compiled program, summed."""
  executed = [0]
  build = train_group.program.build

  def counting_build(*a, **k):
    prog = build(*a, **k)
    run = prog.run

    def counting_run(state, hp, arch, n):
      executed[0] += int(n)
      return run(state, hp, arch, n)
    prog.run = counting_run
    return prog
  monkeypatch.setattr(train_group.program, "build", counting_build)
  return executed


@pytest.mark.parametrize("layout", ["pad", "compact"])
def test_a_rerun_resumes_from_the_checkpoint_and_trains_only_the_rest(
    layout, tmp_path, monkeypatch, capsys, counted):
  args = ARGS + [f"--config.plan.strategy={layout}"]
  ref = tmp_path / "ref"
  assert cli.main(["run", *args, "--workdir", str(ref)]) == 0
  assert counted[0] == TOTAL  # one group, every step once
  w = tmp_path / "w"
  save = runner.WorkerHooks.before_save

  def stop_after_the_first_checkpoint(self, step, curves):
    save(self, step, curves)
    self.stop.set = True  # as SIGTERM would: the next dispatch checkpoints and stops
  monkeypatch.setattr(runner.WorkerHooks, "before_save", stop_after_the_first_checkpoint)
  counted[0] = 0
  with pytest.raises(SystemExit) as e:
    cli.main(["run", *args, "--workdir", str(w)])
  assert e.value.code == 0
  first = counted[0]
  (gid,) = workdir_lib.plan_groups(str(w))
  assert workdir_lib.read_plan(str(w))["groups"][0]["layout"] == layout
  step = workdir_lib.checkpoint_step(str(w), gid)
  assert step is not None and 60 <= step < TOTAL and first == step, (step, first)
  assert not workdir_lib.is_done(str(w), gid)
  monkeypatch.setattr(runner.WorkerHooks, "before_save", save)
  counted[0] = 0
  capsys.readouterr()
  assert cli.main(["run", *args, "--workdir", str(w)]) == 0
  err = capsys.readouterr().err
  assert f"resumes from its step-{step} checkpoint" in err, err
  assert counted[0] == TOTAL - step, (counted[0], step)  # the first `step` not trained again
  assert read_rows(w) == read_rows(ref)
  assert os.path.exists(workdir_lib.group_path(str(w), gid))
