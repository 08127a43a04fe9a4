"""Study configs: defaults, loading `file.py[:arg]` with `--config.a.b=v` overrides, and
validation that names the bad field in one line before anything compiles.

Imports tasks/ only (to check task names and options); never model/, core/ or sweep/.
"""
from __future__ import annotations

import contextlib
import importlib.util
import math
import os

import ml_collections

from depthscale import tasks
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
      advance_at=0.95, models_per_chunk=0))
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
  c = defaults()
  with c.unlocked():
    c.update(user)
  check_fields(c, defaults(), spec)
  for o in overrides or []:
    apply_override(c, o)
  return c


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
  with node.unlocked() if hasattr(node, "unlocked") else contextlib.nullcontext():
    try:
      node[parts[-1]] = value
    except (TypeError, ValueError):  # ml_collections refuses a value of another type
      raise ConfigError(f"--config.{key}: {raw!r} is not of type {type(old).__name__}, like its "
                        f"default {old!r}") from None


def _ints(c, field, lo=1):
  vals = c.grid[field] if field in c.grid else None
  if not isinstance(vals, (list, tuple)) or not vals:
    raise ConfigError(f"grid.{field}: must be a non-empty list")
  for v in vals:
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
      raise ConfigError(f"grid.{field}: {v!r} is not an int >= {lo}")
  return list(vals)


def _num(c, field, lo=0.0, strict=False, integer=False):
  sec, name = field.split(".")
  v = c[sec][name]
  ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
  if integer:
    ok = ok and isinstance(v, int)
  if not ok or v < lo or (strict and v <= lo):
    kind = "an int" if integer else "a number"
    cmp = ">" if strict else ">="
    raise ConfigError(f"{field}: {v!r} is not {kind} {cmp} {lo}")
  return v


def validate(c: ml_collections.ConfigDict):
  """Check every field a user sets; returns the task. One-line ConfigError otherwise."""
  try:
    task = tasks.make(c.task, **dict(c.task_options))
  except UserError as e:
    raise ConfigError(f"task: {e}") from None
  _, widths, _, lengths, _ = (_ints(c, "depth"), _ints(c, "width"), _ints(c, "seed", lo=0),
                              _ints(c, "length"), _ints(c, "repeats"))  # in this order
  lrs = c.grid.lr
  if not isinstance(lrs, (list, tuple)) or not lrs:
    raise ConfigError("grid.lr: must be a non-empty list")
  for v in lrs:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
      raise ConfigError(f"grid.lr: {v!r} is not a positive number")
  heads, hd = c.model.heads, c.model.head_dim
  if isinstance(heads, bool) or not isinstance(heads, int) or heads < 1:
    raise ConfigError(f"model.heads: {heads!r} is not an int >= 1")
  if isinstance(hd, bool) or not isinstance(hd, int) or hd < 0:
    raise ConfigError(f"model.head_dim: {hd!r} is not an int >= 0")
  for w in widths:
    if hd and w % hd:
      raise ConfigError(f"grid.width: {w} is not divisible by model.head_dim={hd}")
    if not hd and w % heads:
      raise ConfigError(f"grid.width: {w} is not divisible by model.heads={heads}")
  if c.model.pos not in ("learned", "rotary", "none"):
    raise ConfigError(f"model.pos: {c.model.pos!r}; valid: learned, rotary, none")
  _num(c, "model.mlp_ratio", 1, integer=True)
  if c.model.dtype not in ("float32", "float64"):
    raise ConfigError(f"model.dtype: {c.model.dtype!r}; valid: float32, float64")
  if c.model.compute_dtype not in ("float32", "bfloat16"):
    raise ConfigError(f"model.compute_dtype: {c.model.compute_dtype!r}; valid: float32, "
                      "bfloat16")
  if c.model.compute_dtype == "bfloat16" and c.model.dtype == "float64":
    raise ConfigError("model.compute_dtype: bfloat16 with model.dtype=float64; give "
                      "model.dtype=float32 (or compute_dtype=float32)")
  if c.model.attention not in ("einsum", "dot_product", "auto"):
    raise ConfigError(f"model.attention: {c.model.attention!r}; valid: einsum, dot_product, "
                      "auto")
  if c.model.remat not in ("none", "block"):
    raise ConfigError(f"model.remat: {c.model.remat!r}; valid: none, block")
  _num(c, "train.batch_size", 1, integer=True)
  steps = _num(c, "train.steps", 1, integer=True)
  k = _num(c, "train.steps_per_call", 1, integer=True)
  if steps % k:
    raise ConfigError(f"train.steps: {steps} is not a multiple of train.steps_per_call={k}")
  every = c.checkpoint_every
  if isinstance(every, bool) or not isinstance(every, int) or every < k or every % k:
    raise ConfigError(f"checkpoint_every: {every!r} must be a multiple of "
                      f"train.steps_per_call={k}")
  _num(c, "train.weight_decay", 0.0)
  _num(c, "train.warmup", 0, integer=True)
  _num(c, "train.clip_norm", 0.0)
  _num(c, "train.models_per_chunk", 0, integer=True)
  if c.train.decay not in ("constant", "linear", "cosine"):
    raise ConfigError(f"train.decay: {c.train.decay!r}; valid: constant, linear, cosine")
  if c.train.curriculum not in ("none", "fixed", "adaptive"):
    raise ConfigError(f"train.curriculum: {c.train.curriculum!r}; valid: none, fixed, adaptive")
  if c.train.curriculum == "fixed":
    _num(c, "train.steps_per_stage", 1, integer=True)
  if c.train.curriculum != "none" and not getattr(task, "prefix_consistent", False):
    raise ConfigError(f"train.curriculum: task {c.task!r} has no length curriculum "
                      "(its examples are not prefix-consistent); use 'none'")
  lease = c.get("lease_s")
  if isinstance(lease, bool) or not isinstance(lease, (int, float)) or not lease > 0:
    raise ConfigError(f"lease_s: {lease!r} is not a number of seconds > 0")
  _num(c, "eval.size", 1, integer=True)
  for field in ("eval.threshold", "train.advance_at"):
    v = _num(c, field, 0.0, strict=True)
    if v > 1:
      raise ConfigError(f"{field}: {v!r} is an accuracy; give a number in (0, 1]")
  _num(c, "plan.device_memory_gb", 0.0)
  _num(c, "plan.gflops", 0.0, strict=True)
  _num(c, "plan.compile_s", 0.0)
  v = _num(c, "plan.mfu", 0.0, strict=True)
  if v > 1:
    raise ConfigError(f"plan.mfu: {v!r} is a fraction of the device's peak; give a number "
                      "in (0, 1]")
  if c.plan.strategy not in ("auto", "bucket", "pad", "compact"):
    raise ConfigError(f"plan.strategy: {c.plan.strategy!r}; valid: auto, bucket, pad, "
                      "compact")
  _num(c, "plan.max_models_per_group", 1, integer=True)
  if c.wandb.mode not in ("", "online", "offline", "disabled"):
    raise ConfigError(f"wandb.mode: {c.wandb.mode!r}; valid: '', online, offline, disabled")
  if c.report.claims:
    from depthscale.report import claims as claims_lib  # no jax; matplotlib only if claims
    try:
      claims_lib.check_spec([dict(x) for x in c.report.claims], dict(c.report.companions))
    except ValueError as e:
      raise ConfigError(str(e)) from None
  for name, spec in dict(c.report.companions).items():
    if not isinstance(spec, str) or not os.path.isfile(spec.partition(":")[0]):
      raise ConfigError(f"report.companions.{name}: {spec!r} is not a study file.py[:args]")
  for n in lengths:
    try:
      task.check_length(n)
    except UserError as e:
      raise ConfigError(f"grid.length: {e}") from None
  return task
