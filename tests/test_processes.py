"""Several launches on one workdir: two simultaneous launches never train a group twice,
and a corrupt latest checkpoint falls back."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT, SPLIT_SMOKE, read_rows as rows
from depthscale.io.checkpoint import GroupCheckpoints

ARGS = ["run", *SPLIT_SMOKE]


def launch(workdir, *extra):
  env = dict(os.environ, WANDB_MODE="disabled")
  return subprocess.Popen([sys.executable, "-m", "depthscale.cli", *ARGS, "--workdir",
                           str(workdir), *extra], cwd=ROOT, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def finish(procs):
  errs = []
  for p in procs:
    _, err = p.communicate(timeout=600)
    assert p.returncode == 0, err[-2000:]
    errs.append(err)
  return errs


def done(err):
  return [l.split()[2] for l in err.splitlines() if l.endswith(" done")]


@pytest.mark.optimized  # SPLIT_SMOKE, as the reference run (conftest)
@pytest.mark.slow
def test_concurrent_launches_match_one_process(tmp_path, reference_run):
  """Two independent workers on one workdir (no jax.distributed): each pulls groups, no
  group is trained twice, and the results equal one process."""
  ref, err = reference_run
  assert len(done(err)) == 2
  both = tmp_path / "both"
  errs = finish([launch(both), launch(both, "--exit-when-idle")])
  trained = done(errs[0]) + done(errs[1])
  assert sorted(trained) == sorted(set(trained)) and len(trained) == 2  # never twice
  finish([launch(both)])  # a rerun finds everything done
  assert rows(both) == rows(ref)


QUEUED = ["--config.train.slots=2", "--config.train.stop=plateau",
          "--config.train.patience=2"]  # each 3-model group queued through 2 slots


@pytest.mark.slow
def test_concurrent_launches_on_a_queued_study_match_one_process(tmp_path):
  """Two workers started together on one workdir of a queued study (slots and a stopping
  rule): no group is trained twice, and rows and curves equal one process's."""
  ref, both = tmp_path / "ref", tmp_path / "both"
  (err,) = finish([launch(ref, *QUEUED)])
  assert len(done(err)) == 2
  errs = finish([launch(both, *QUEUED), launch(both, *QUEUED, "--exit-when-idle")])
  trained = done(errs[0]) + done(errs[1])
  assert sorted(trained) == sorted(set(trained)) and len(trained) == 2  # never twice
  assert rows(both) == rows(ref)
  for gid in os.listdir(ref / "groups"):
    a, b = (json.loads((w / "groups" / gid).read_text()) for w in (ref, both))
    assert a["curves"] == b["curves"]


CORRUPT = """
import os, sys, numpy as np
from depthscale.io.checkpoint import GroupCheckpoints
d, damage = sys.argv[1], sys.argv[2]
tree = {"w": np.arange(6000, dtype=np.float32).reshape(2, 3000), "step": np.zeros((), np.int32)}
ck = GroupCheckpoints(d)
ck.save(10, tree)
ck.save(20, {"w": tree["w"] + 1, "step": np.full((), 20, np.int32)})
for root, _, files in os.walk(os.path.join(d, "20")):
  for f in files:
    rel = os.path.relpath(os.path.join(root, f), d)
    if damage == "arrays" and os.sep + "d" + os.sep in rel or damage == "emptied":
      data = open(os.path.join(root, f), "rb").read()
      open(os.path.join(root, f), "wb").write(data[:len(data) // 2])
print("RESTORING", file=sys.stderr, flush=True)
step, got = GroupCheckpoints(d).restore_latest(tree)
assert step == 10 and np.array_equal(got["w"], tree["w"]), step
assert getattr(sys.unraisablehook, "_depthscale", False)  # late reads dropped (below)
import logging
assert any(getattr(f, "_depthscale", False) for f in logging.getLogger("asyncio").filters)
"""


@pytest.mark.parametrize("damage", ["arrays", "emptied"])
def test_a_damaged_latest_checkpoint_is_one_line_and_the_previous_one_restores(damage,
                                                                             tmp_path):
  """In a process of its own (orbax logs through absl to stderr): a half-written latest
  checkpoint (its array files, or every file, cut in half) gives exactly one
  line naming the step, then the previous checkpoint restores."""
  p = subprocess.run([sys.executable, "-c", CORRUPT, str(tmp_path / "ck"), damage],
                     capture_output=True, text=True, timeout=300)
  assert p.returncode == 0, p.stderr[-3000:]
  after = p.stderr.split("RESTORING\n", 1)[1].strip().splitlines()
  assert len(after) == 1 and after[0].startswith("depthscale: checkpoint step 20 in ") \
      and "unreadable" in after[0] and "trying the previous one" in after[0], p.stderr


LATE = """
import asyncio, sys, tensorstore as ts
from depthscale.io import checkpoint
if sys.argv[1] == "after":  # what a failed restore installs
  checkpoint._drop_late_callbacks_to_closed_loops()
closed = asyncio.new_event_loop()
closed.close()
promise, future = ts.Promise.new()  # a read that ends after orbax closed its loop
future.add_done_callback(lambda f: closed.call_soon_threadsafe(print, "late"))
def own(f):
  raise ValueError("a callback's own error")
future.add_done_callback(own)
promise.set_result(1)
"""


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_late_read_after_a_failed_restore_prints_nothing_more(when):
  """The flaky line fixed in e359b32 (2026-11-27): tensorstore reports a callback that
  posts to orbax's closed loop through sys.unraisablehook. Without depthscale's hook
  (which every restore installs: the damaged-checkpoint test above checks it) it prints,
  so the reproduction is real; with it, that traceback is dropped and any other still
  prints."""
  p = subprocess.run([sys.executable, "-c", LATE, when], capture_output=True, text=True,
                     timeout=120)
  assert p.returncode == 0, p.stderr
  assert "a callback's own error" in p.stderr
  assert ("Event loop is closed" in p.stderr) == (when == "before"), p.stderr


UNRETRIEVED = """
import asyncio, gc, sys, tensorstore as ts
from depthscale.io import checkpoint
if sys.argv[1] == "after":  # what every restore installs
  checkpoint._drop_unretrieved_read_errors()
loop = asyncio.new_event_loop()
def failed(text):  # a read orbax gathered and never awaited once another one failed
  promise, future = ts.Promise.new()
  task = asyncio.ensure_future(future, loop=loop)
  promise.set_exception(ValueError(text))
  loop.run_until_complete(asyncio.sleep(0.01))
  assert task.done()
failed('OUT_OF_RANGE: Error opening "zarr" driver: Error reading "step/.zarray" in OCDBT')
failed("a task's own error")
loop.close()
gc.collect()
"""


@pytest.mark.parametrize("when", ["before", "after"])
def test_unretrieved_reads_of_a_failed_restore_print_nothing(when):
  """The damaged-checkpoint test above failed once in 2026-11-29's suite (a fresh clone
  under the AVX512 cap, Xeon-SPR): asyncio logged a failed read's task "Task exception was
  never retrieved", a traceback beside depthscale's one line. Without the filter every
  restore installs, both records print (the reproduction is real); with it, the read's is
  dropped and any other error still prints."""
  p = subprocess.run([sys.executable, "-c", UNRETRIEVED, when], capture_output=True,
                     text=True, timeout=120)
  assert p.returncode == 0, p.stderr
  assert "a task's own error" in p.stderr
  assert ("step/.zarray" in p.stderr) == (when == "before"), p.stderr
  assert p.stderr.count("Task exception was never retrieved") == (2 if when == "before"
                                                                  else 1), p.stderr


def test_corrupt_latest_checkpoint_falls_back_to_previous(tmp_path, capsys):
  tree = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "step": np.zeros((), np.int32)}
  ck = GroupCheckpoints(str(tmp_path / "ck"))
  ck.save(10, tree)
  ck.save(20, {"w": tree["w"] + 1, "step": np.full((), 20, np.int32)})
  for root, _, files in os.walk(tmp_path / "ck" / "20"):
    for f in files:  # a half-written save: every file truncated
      open(os.path.join(root, f), "w").close()
  step, got = GroupCheckpoints(str(tmp_path / "ck")).restore_latest(tree)
  assert step == 10 and np.array_equal(got["w"], tree["w"])
  assert "unreadable" in capsys.readouterr().err
