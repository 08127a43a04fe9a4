"""The bench presets by name: each registers how it runs and its one-line summary.

`depthscale bench --preset NAME` is a lookup here; the registered names, in the order
they were registered, are the valid values of --preset.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

from depthscale.errors import UserError


@dataclasses.dataclass(frozen=True)
class Options:
  """The command's options, as every preset gets them (each reads what it needs)."""
  devices: int | None            # local devices to use (None: all, if they divide the models)
  models_per_chunk: int | None   # None: the preset's own
  dtype: str | None              # the models' compute dtype and the peak probe's (None:
                                 # the preset's own)
  models: int | None             # models in an engine preset's grid (None: its own)


@dataclasses.dataclass(frozen=True)
class Bench:
  """One preset: `run(options, log)` -> its JSON-ready result; `summary(result)` -> the
  line the command prints (before "; wrote FILE"). `through_runner`: it trains whole
  studies through the runner, which sets JAX up as `make run` does, so the command
  leaves the host's devices and XLA settings as they are. `uses`: the Options fields it
  reads (the command refuses the others rather than ignore them)."""
  name: str
  run: Callable[[Options, Callable[[str], None]], dict]
  summary: Callable[[dict], str]
  through_runner: bool = False
  uses: tuple[str, ...] = ()


BENCHES: dict[str, Bench] = {}


def register(name: str, run, summary, through_runner: bool = False, uses=()) -> None:
  """Add preset `name` (once: a second registration of a name is a bug)."""
  if name in BENCHES:
    raise ValueError(f"bench preset {name!r} is registered twice")
  unknown = set(uses) - {f.name for f in dataclasses.fields(Options)}
  if unknown:
    raise ValueError(f"bench preset {name!r} uses unknown options {sorted(unknown)}")
  BENCHES[name] = Bench(name, run, summary, through_runner, tuple(uses))


def names() -> tuple[str, ...]:
  return tuple(BENCHES)


def get(name: str) -> Bench:
  """The preset called `name`, or a one-line UserError listing the valid ones."""
  if name not in BENCHES:
    raise UserError(f"unknown preset {name!r}; valid presets: {', '.join(BENCHES)}")
  return BENCHES[name]
