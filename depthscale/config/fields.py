"""Each config field's one declaration: `field(c, "train.steps", 1000, "meaning")` sets
the default on the config and records the field's default and meaning in REGISTRY, which
docs/config.md is generated from (config/reference.py). A section is declared the same
way by `section`, which gives it its one-line meaning."""
from __future__ import annotations

import copy
import dataclasses
from typing import Any

import ml_collections


@dataclasses.dataclass(frozen=True)
class Declared:
  """A field (or a section: default None) as declared: its dotted path, default, meaning."""
  path: str
  default: Any
  meaning: str


REGISTRY: dict[str, Declared] = {}   # dotted path -> declaration, in declaration order
SECTIONS: dict[str, Declared] = {}   # section name -> its declaration


def _node(c: ml_collections.ConfigDict, path: str):
  """(the ConfigDict holding `path`, the path's last name)."""
  *parents, name = path.split(".")
  for p in parents:
    c = c[p]
  return c, name


def _record(book: dict, path: str, default, meaning: str) -> None:
  if not isinstance(meaning, str) or not meaning.strip():
    raise ValueError(f"config field {path}: declared without a meaning")
  book[path] = Declared(path, default, " ".join(meaning.split()))


def field(c: ml_collections.ConfigDict, path: str, default, meaning: str) -> None:
  """Set `path` (dotted from the config's root, its section declared first) to `default`
  on `c`, and record its default and meaning."""
  node, name = _node(c, path)
  node[name] = default
  snapshot = default.to_dict() if isinstance(default, ml_collections.ConfigDict) else default
  _record(REGISTRY, path, copy.deepcopy(snapshot), meaning)


def section(c: ml_collections.ConfigDict, name: str, meaning: str) -> ml_collections.ConfigDict:
  """A new, empty section `name` on `c` (its fields declared next by `field`); returns it."""
  c[name] = ml_collections.ConfigDict()
  _record(SECTIONS, name, None, meaning)
  return c[name]


def one_of(valid) -> str:
  """A registry's valid names as a meaning writes them: `one of a, b, c`."""
  return "one of " + ", ".join(str(v) if v else repr(v) for v in valid)
