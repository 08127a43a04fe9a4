"""Study configs: defaults, loading `file.py[:arg]` with `--config.a.b=v` overrides, and
unknown fields refused in one line (config_checks.validate checks every value).

Imports depthscale.errors only; never tasks/, model/, core/ or sweep/.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os

import ml_collections

from depthscale.errors import UserError


class ConfigError(UserError):
  """A user's config is wrong; the message is one line naming the field."""


def defaults() -> ml_collections.ConfigDict:
  """Every field a study may set, with sensible defaults."""
  c = ml_collections.ConfigDict()
  c.name = "study"
  c.task = "word_problem"
  c.task_options = ml_collections.ConfigDict()
  c.grid = ml_collections.ConfigDict(dict(depth=[2], width=[64], seed=[0], lr=[1e-3],
                                          length=[16], repeats=[1]))
  c.model = ml_collections.ConfigDict(dict(heads=4, head_dim=0, mlp_ratio=4, pos="learned",
                                           dtype="float32", compute_dtype="float32",
                                           attention="auto", remat="none"))
  # head_dim > 0: heads = width // head_dim for each width (else model.heads everywhere)
  c.train = ml_collections.ConfigDict(dict(
      batch_size=32, steps=1000, steps_per_call=100, weight_decay=0.01, warmup=0,
      decay="constant", clip_norm=1.0, curriculum="none", steps_per_stage=0,
      advance_at=0.95, models_per_chunk=0, stop="none", stop_every=0, patience=5,
      eta=3, slots=0, rebuild="auto", rebuild_steps=0))
  # stop: none | solved | plateau | halving (core/stopping.py), checked on the held-out set
  # every stop_every steps (0: every steps_per_call); plateau: after `patience` evaluations
  # without improvement; halving: successive halving over each setting's learning rates,
  # keeping the best 1/eta at each rung (core/halving.py). The step budget (steps) stays the upper bound. slots > 0: each
  # group's program trains that many models at once; the rest queue and take the slot
  # of a model that is done (continuous batching, sweep/slots.py); 0 = all at once.
  # rebuild (with a rule): auto | never; auto drops idle slots (or gives them to queued
  # models of another depth) in a rebuilt program when the idle cost over the steps left
  # exceeds a compile of rebuild_steps steps (0: plan.compile_s over the planner's
  # seconds per step; sweep/resize.py).
  # models_per_chunk > 0: each step runs the vmapped models this many at a time (less
  # live memory; measured faster on CPU for wide models, see BUILD_NOTES); 0 = all at once
  c.eval = ml_collections.ConfigDict(dict(size=1000, threshold=0.95))
  c.plan = ml_collections.ConfigDict(dict(strategy="auto", max_models_per_group=64,
                                          gflops=20.0, compile_s=20.0, device_memory_gb=0.0,
                                          mfu=0.4))
  # device_memory_gb > 0: each group's compiled program must fit it (else models_per_chunk,
  # remat or a split, chosen by the plan); 0 = the device's own limit (none on a CPU).
  # gflops: the CPU FLOP rate the `auto` strategy assumes; on a known accelerator its
  # table peak x mfu is used (devices.py). compile_s: seconds per program it assumes.
  c.checkpoint_every = 500
  c.lease_s = 300.0  # a group whose worker sent no heartbeat for this long may be taken over
  c.wandb = ml_collections.ConfigDict(dict(mode="", project="depthscale"))
  c.paper_fit = ml_collections.ConfigDict()
  # What the report checks against the study's paper: claims (a list of {"kind", "claim",
  # "paper", ...}, kinds in report/claims.py), companions ({name: "study.py:args"}, run
  # after the study into WORKDIR/<name> and set beside it), paper_table ({depth: the
  # published numbers}); scaled_by is the task's (set by `study.resolve`, read by the report).
  c.report = ml_collections.ConfigDict(dict(claims=[], companions=ml_collections.ConfigDict(),
                                            paper_table=ml_collections.ConfigDict(),
                                            scaled_by=""))
  return c


def study_args(arg: str | None, valid: tuple[str, ...],
               exclusive: tuple[tuple[str, ...], ...] = ()) -> set[str]:
  """The arguments of `--config file.py:a,b` as a set, each checked against the study's
  `valid` ones; at most one of each `exclusive` tuple. One-line ConfigError otherwise."""
  args = [a.strip() for a in (arg or "").split(",") if a.strip()]
  for a in args:
    if a not in valid:
      raise ConfigError(f"unknown study argument {a!r}; valid: {', '.join(valid)} "
                        "(comma-separated)")
  for group in exclusive:
    both = [a for a in group if a in args]
    if len(both) > 1:
      raise ConfigError(f"study arguments {' and '.join(both)} contradict each other; "
                        "give one")
  return set(args)


def smoke(c: ml_collections.ConfigDict, length: int = 16, depths=(1, 2, 3),
          width: int = 32) -> ml_collections.ConfigDict:
  """The same study shrunk to a couple of CPU minutes: 3 depths x 2 seeds at one width
  and one length, 300 steps, checkpointed every 60 steps."""
  c.grid.depth, c.grid.width, c.grid.seed = list(depths), [width], [0, 1]
  c.grid.length, c.grid.lr = [length], [3e-3]
  c.model.heads = min(c.model.heads, 4)
  c.model.compute_dtype = "float32"  # CPU scale: bf16 matmuls are slow on a CPU
  c.model.head_dim = 0
  c.train.update(dict(batch_size=16, steps=300, steps_per_call=20, warmup=0))
  if c.train.curriculum == "fixed":
    c.train.steps_per_stage = 60
  c.checkpoint_every = 60
  c.eval.size = 256
  c.name += "-smoke"
  return c


def cpu_scale(c: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """What every study's `:cpu` variant shares (its sizes are the study's own): float32,
  heads from model.heads (not head_dim), the name tagged -cpu."""
  c.model.compute_dtype = "float32"  # bf16 matmuls are slow on a CPU
  c.model.head_dim = 0
  c.name += "-cpu"
  return c


def load(spec: str, overrides: list[str] | None = None) -> ml_collections.ConfigDict:
  """Load `path.py[:arg]` (its get_config(arg)), merged over defaults, then overrides
  `a.b=v`. Raises ConfigError (one line) on any problem."""
  path, _, arg = spec.partition(":")
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
  file's directory `base`: made absolute here, so config.json, later commands and other
  workers find the same file whatever their working directory."""
  where, colon, name = c.task.rpartition(":") if isinstance(c.task, str) else ("", "", "")
  if colon and where.endswith(".py") and not os.path.isabs(os.path.expanduser(where)):
    c.task = os.path.normpath(os.path.join(base, where)) + ":" + name


def merge(node: ml_collections.ConfigDict, user, where: str, prefix: str = "") -> None:
  """Set the fields of `user` (a dict or ConfigDict) on `node`, section by section; a
  value of another type than its default's is one ConfigError line naming the field."""
  for key, value in user.items():
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
  import ast
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
