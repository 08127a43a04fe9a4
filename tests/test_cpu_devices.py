"""plan.cpu_devices: a study that splits JAX's CPU into devices before JAX starts, the
line it prints where that is too late, and its companions on the same devices."""
import os
import subprocess
import sys

import pytest

from depthscale import config
from depthscale.cli import sweep as sweep_cmd
from depthscale.sweep import study as study_lib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
A5 = "experiments/a5_depth.py:cpu,smoke"


@pytest.mark.parametrize("value", ["-1", "1.5", "two"])
def test_a_bad_count_is_one_line_naming_the_field(value):
  with pytest.raises(config.ConfigError, match=r"plan\.cpu_devices: ") as e:
    study_lib.resolve(config.load(A5, [f"plan.cpu_devices={value}"]))
  assert "\n" not in str(e.value)


SPLIT = """
import jax
from depthscale.sweep import study
study.split_cpu({first})
print(jax.device_count())
study.split_cpu({then})
"""


@pytest.mark.parametrize("flags,first,then,count,line", [
    ("", 3, 3, 3, None),           # before JAX starts: 3 devices, then nothing to say
    ("", 3, 2, 3, "plan.cpu_devices=2 not applied: JAX has 3 CPU device(s)"),  # too late
    ("", 0, 0, 1, None),           # 0: JAX as it starts (one CPU device)
    ("--xla_force_host_platform_device_count=1", 2, 0, 1,
     "plan.cpu_devices=2 not applied: JAX has 1 CPU device(s)"),  # XLA_FLAGS decides
])
def test_split_cpu_before_jax_starts_or_says_why_not(flags, first, then, count, line):
  env = dict(os.environ, XLA_FLAGS=flags, JAX_PLATFORMS="cpu")
  p = subprocess.run([sys.executable, "-c", SPLIT.format(first=first, then=then)], cwd=ROOT,
                     env=env, capture_output=True, text=True, timeout=120)
  assert p.returncode == 0, p.stderr[-2000:]
  assert p.stdout.split() == [str(count)]
  said = [l for l in p.stderr.splitlines() if l.startswith("depthscale:")]
  assert said == ([] if line is None else [f"depthscale: {line} (XLA_FLAGS or an earlier "
                                           "start); training on those"]), p.stderr


def test_companions_train_the_studys_seeds_steps_and_devices(tmp_path):
  c = config.load(A5, ["grid.seed=[5, 6]", "train.steps=40", "plan.cpu_devices=1"])
  study = study_lib.resolve(c)
  others = sweep_cmd.companions(study, str(tmp_path))
  assert sorted(others) == ["control", "solvable"]
  for name, (other, workdir) in others.items():
    assert workdir == os.path.join(str(tmp_path), name)
    got = other.config
    assert list(got.grid.seed) == [5, 6] and got.train.steps == 40
    assert got.plan.cpu_devices == 1
    assert got.task_options.group == {"control": "Z60", "solvable": "A4xZ5"}[name]
