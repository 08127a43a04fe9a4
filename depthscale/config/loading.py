"""Loading a study file `file.py[:arg]`: its get_config merged over the defaults, unknown
fields refused, `a.b=v` overrides applied, a task file anchored to the study's directory;
every problem one ConfigError line naming the field."""
from __future__ import annotations

import ast
import contextlib
import importlib.util
import os

import ml_collections

from depthscale.config.base import ConfigError
from depthscale.config.sections import defaults


def load(spec: str, overrides: list[str] | None = None) -> ml_collections.ConfigDict:
  """Load `path.py[:arg]` (its get_config(arg)), merged over defaults, then overrides
  `a.b=v`. Raises ConfigError (one line) on any problem."""
  path, _, arg = spec.partition(":")
  if os.path.isdir(path):
    raise ConfigError(f"--config: {path!r} is a directory; give a study file FILE.py[:ARG]")
  if not os.path.isfile(path):
    raise ConfigError(f"--config: no such file {path!r}")
  if not path.endswith(".py"):
    raise ConfigError(f"--config: {path!r} is not a .py file; give a study file FILE.py[:ARG]")
  mod_spec = importlib.util.spec_from_file_location("depthscale_user_config", path)
  mod = importlib.util.module_from_spec(mod_spec)
  try:
    mod_spec.loader.exec_module(mod)
  except Exception as e:  # the user's file: report, don't trace
    raise ConfigError(f"--config: {path} failed to load: {type(e).__name__}: {e}") from None
  if not hasattr(mod, "get_config"):
    raise ConfigError(f"--config: {path} has no get_config(arg=None)")
  try:
    user = mod.get_config(arg or None)
  except ConfigError as e:  # a study's own check (e.g. of its arguments)
    raise ConfigError(f"--config {spec}: {e}") from None
  except Exception as e:  # the user's study code: report in one line
    raise ConfigError(f"--config: {spec}: get_config failed: {type(e).__name__}: {e}") from None
  if not isinstance(user, (dict, ml_collections.ConfigDict)):
    raise ConfigError(f"--config {spec}: get_config returned {type(user).__name__}; return "
                      "an ml_collections.ConfigDict or a dict of fields")
  c = defaults()
  merge(c, user, f"--config {spec}")
  check_fields(c, defaults(), spec)
  for o in overrides or []:
    apply_override(c, o)
  anchor_task_file(c, os.path.dirname(os.path.abspath(path)))
  return c


def anchor_task_file(c: ml_collections.ConfigDict, base: str) -> None:
  """A task given as `relative/file.py:Class` (tasks/sources.py) is read from the config
  file's directory `base` (`~` expanded): made absolute here, so config.json, later commands and other
  workers find the same file whatever their working directory."""
  where, colon, name = c.task.rpartition(":") if isinstance(c.task, str) else ("", "", "")
  if colon and where.endswith(".py"):  # `~` expanded: another user's workers read it too
    c.task = os.path.normpath(os.path.join(base, os.path.expanduser(where))) + ":" + name


def merge(node: ml_collections.ConfigDict, user, where: str, prefix: str = "") -> None:
  """Set the fields of `user` (a dict or ConfigDict) on `node`, section by section; a
  value of another type than its default's is one ConfigError line naming the field."""
  for key, value in user.items():
    if not isinstance(key, str):
      raise ConfigError(f"{where}: {prefix}{key!r}: field and option names are strings; "
                        f"write {prefix}{str(key)!r}")
    field, old = prefix + key, node[key] if key in node else None
    if isinstance(old, ml_collections.ConfigDict):
      if not hasattr(value, "items"):
        raise ConfigError(f"{where}: {field} is a section; give it a dict of its fields, not "
                          f"{value!r}")
      merge(old, value, where, field + ".")
      continue
    try:
      with node.unlocked():
        node[key] = value
    except (TypeError, ValueError):  # ml_collections refuses a value of another type
      raise ConfigError(f"{where}: {field}: {value!r} is not of type {type(old).__name__}, "
                        f"like its default {old!r}") from None


FREE_FORM = ("task_options", "paper_fit", "report.companions", "report.paper_table")  # own keys


def check_fields(c, known, spec: str, prefix: str = "") -> None:
  """A one-line ConfigError for a field of `c` the defaults (`known`) lack (a typo)."""
  for key in c.keys():
    if prefix + key not in FREE_FORM and key not in known:
      raise ConfigError(f"--config {spec}: unknown field {prefix + key!r}; valid: "
                        f"{', '.join(sorted(known.keys()))}")
    if (prefix + key not in FREE_FORM and isinstance(known[key], ml_collections.ConfigDict)
        and hasattr(c[key], "keys")):
      check_fields(c[key], known[key], spec, prefix + key + ".")


def apply_override(c: ml_collections.ConfigDict, text: str) -> None:
  """Apply one `a.b=v` override; v is parsed as a Python literal, else kept a string."""
  key, eq, raw = text.partition("=")
  if not eq:
    raise ConfigError(f"override {text!r}: write it as --config.FIELD=VALUE")
  try:
    value = ast.literal_eval(raw)
  except (ValueError, SyntaxError):
    value = raw
  node, parts = c, key.split(".")
  for i, p in enumerate(parts[:-1]):
    if p not in node:
      raise ConfigError(f"--config.{key}: no field {p!r}; valid: {', '.join(sorted(node.keys()))}")
    node = node[p]
    if not isinstance(node, ml_collections.ConfigDict):
      field = ".".join(parts[:i + 1])
      raise ConfigError(f"--config.{key}: {field} is a plain field ({node!r}), it has no "
                        f"sub-fields; write --config.{field}=VALUE")
  if parts[-1] not in node:
    raise ConfigError(f"--config.{key}: unknown field; valid: {', '.join(sorted(node.keys()))}")
  old = node[parts[-1]]
  if isinstance(old, ml_collections.ConfigDict) and key not in FREE_FORM:
    raise ConfigError(f"--config.{key}: {key} is a section; override its fields one by one, "
                      f"e.g. --config.{key}.{next(iter(old.keys()), 'FIELD')}=VALUE")
  with node.unlocked() if hasattr(node, "unlocked") else contextlib.nullcontext():
    try:
      node[parts[-1]] = value
    except (TypeError, ValueError):  # ml_collections refuses a value of another type
      raise ConfigError(f"--config.{key}: {raw!r} is not of type {type(old).__name__}, like its "
                        f"default {old!r}") from None
