"""docs/config.md, the config reference, generated from each field's one declaration
(config/fields.py): a table per section of every field of `defaults()`, its default and
meaning. Regenerate with `python -m depthscale.config.reference > docs/config.md`."""
from __future__ import annotations

import ml_collections

from depthscale.config import fields
from depthscale.config.sections import defaults

COMMAND = "python -m depthscale.config.reference > docs/config.md"
TOP = "top level"  # the group of fields outside any section
INTRO = f"""# Config reference

Every field a study config may set (`get_config` in a study file, or `--config.FIELD=VALUE`
on the command line), with its default and meaning, section by section. Each field is
declared once, with its default and meaning, in its section's module under
`depthscale/config/`; this file is generated from those declarations: do not edit it by
hand. After adding or changing a field, regenerate it with

    {COMMAND}

(`tests/test_config_reference.py` fails until it matches).
"""


def leaves(c: ml_collections.ConfigDict, prefix: str = "") -> list[str]:
  """The dotted paths of `c`'s fields, in order: a declared field is one (a free-form
  dict too), and so is an undeclared empty section; other sections are walked."""
  out = []
  for key in c.keys():
    path, v = prefix + key, c[key]
    if isinstance(v, ml_collections.ConfigDict) and v and path not in fields.REGISTRY:
      out += leaves(v, path + ".")
    else:
      out.append(path)
  return out


def undeclared() -> list[str]:
  """The fields of `defaults()` set without a declaration (or with an empty meaning)."""
  paths = leaves(defaults())
  return [p for p in paths if p not in fields.REGISTRY or not fields.REGISTRY[p].meaning]


def groups() -> dict[str, list[fields.Declared]]:
  """Every declared field of `defaults()` by section (TOP: the top-level ones first), in
  the order of their declarations (ConfigDict's keys are sorted)."""
  paths, out = set(leaves(defaults())), {TOP: []}
  for path, declared in fields.REGISTRY.items():
    if path in paths:
      out.setdefault(path.split(".")[0] if "." in path else TOP, []).append(declared)
  return out


def _cell(text: str) -> str:
  return text.replace("|", "\\|")


def _table(sec: str, declared: list[fields.Declared]) -> list[str]:
  about = fields.SECTIONS[sec].meaning if sec in fields.SECTIONS else "fields outside a section"
  head = "Top-level fields" if sec == TOP else f"`{sec}`"
  rows = [f"| `{d.path}` | `{_cell(repr(d.default))}` | {_cell(d.meaning)} |" for d in declared]
  return [f"## {head}", "", about[0].upper() + about[1:] + ".", "",
          "| field | default | meaning |", "|---|---|---|"] + rows + [""]


def markdown() -> str:
  """The text of docs/config.md."""
  lines = [INTRO]
  for sec, declared in groups().items():
    lines += _table(sec, declared)
  return "\n".join(lines)


if __name__ == "__main__":
  print(markdown(), end="")
