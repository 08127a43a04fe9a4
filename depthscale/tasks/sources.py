"""Where a task comes from: a study's `task` field names one of

  word_problem               a built-in (REGISTRY) or an entry point of the `depthscale.tasks`
                             group, registered by an installed package
  path/to/file.py:Class      a Task subclass in a file (config.load anchors a relative path
                             at the config file's directory, so config.json holds it absolute)
  package.module:Class       a Task subclass in an importable module

Every command (plan, run, status, report, workers, SLURM tasks) reads the same field from
config.json and finds the task here the same way. A missing or broken task file or module
is one UserError line naming it and what failed; a bug in a built-in keeps its traceback.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import os
import sys

from depthscale.errors import UserError
from depthscale.tasks.base import Task

ENTRY_POINTS = "depthscale.tasks"
_FILES: dict[str, object] = {}  # absolute path -> its module, loaded once per process


def is_file_spec(spec: str) -> bool:
  """`path.py:Class` (a file) rather than `module:Class` or a name."""
  return ":" in spec and spec.rpartition(":")[0].endswith(".py")


def entry_points() -> dict[str, importlib.metadata.EntryPoint]:
  """The installed packages' task names (group `depthscale.tasks`)."""
  return {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINTS)}


def find(spec: str, builtins: dict[str, type[Task]]) -> type[Task]:
  """The Task class `spec` names (see the module docstring); one UserError line otherwise."""
  if not isinstance(spec, str) or not spec.strip():
    raise UserError(f"task {spec!r}: give a task name, FILE.py:CLASS or MODULE:CLASS")
  if spec in builtins:
    clash = entry_points().get(spec)
    if clash is not None:
      raise UserError(f"task {spec!r} names both the built-in and the entry point {spec!r} "
                      f"({clash.value}) of an installed package; give the package's task as "
                      f"{clash.value} or rename its entry point")
    return builtins[spec]
  if ":" not in spec:
    eps = entry_points()
    if spec in eps:
      return _checked(_load_entry_point(eps[spec]), f"entry point {spec!r} ({eps[spec].value})")
    names = sorted(set(builtins) | set(eps))
    raise UserError(f"unknown task {spec!r}; valid tasks: {', '.join(names)} (or "
                    "FILE.py:CLASS, MODULE:CLASS)")
  where, _, name = spec.rpartition(":")
  module = _load_file(where) if is_file_spec(spec) else _load_module(where)
  if not name.isidentifier():
    raise UserError(f"task {spec!r}: {name!r} is not a class name; write {where}:CLASS")
  if not hasattr(module, name):
    found = sorted(k for k, v in vars(module).items()
                   if isinstance(v, type) and issubclass(v, Task) and v is not Task)
    raise UserError(f"task {spec!r}: {where} has no {name!r}; its Task classes: "
                    f"{', '.join(found) or 'none'}")
  return _checked(getattr(module, name), spec)


def origin(spec: str, builtins: dict[str, type[Task]]) -> str:
  """Where `spec` comes from, in words (for `tasks list` and the report)."""
  if spec in builtins:
    return "built-in"
  if ":" not in spec:
    ep = entry_points().get(spec)
    dist = getattr(getattr(ep, "dist", None), "name", None)
    return f"entry point {ep.value} ({dist or 'an installed package'})" if ep else "unknown"
  return "file " + spec if is_file_spec(spec) else "module " + spec


def digest(spec: str, builtins: dict[str, type[Task]], single_file: bool = False) -> str:
  """The identity of task `spec`'s source, recorded in a workdir's config.json: the SHA-256
  of its file (a file task), or of the code a module task runs: the module's file, or for
  a module inside a package (MODULE:CLASS or an entry point) every .py file of its
  top-level package ("sha256-pkg:", paths and contents), so that an edited helper module
  counts; its package's version if there is no file; "" for a built-in (the package's own
  numbers are guarded by the drift test). `single_file`: the module's file only, the
  digest workdirs recorded before packages were covered. Call after `find` (the module is
  loaded)."""
  if spec in builtins:
    return ""
  if is_file_spec(spec):
    path = os.path.abspath(os.path.expanduser(spec.rpartition(":")[0]))
  else:
    ep = entry_points().get(spec) if ":" not in spec else None
    name = (ep.value if ep else spec).partition(":")[0]
    module = sys.modules.get(name)
    path = getattr(module, "__file__", None)
    if not path or not os.path.isfile(path):
      dist = getattr(getattr(ep, "dist", None), "version", None)
      return f"version {dist}" if dist else ""
    files = [] if single_file else package_files(name)
    if files:
      h = hashlib.sha256()
      for root, rel in files:
        with open(os.path.join(root, rel), "rb") as f:
          h.update(rel.encode() + b"\0" + hashlib.sha256(f.read()).digest())
      return "sha256-pkg:" + h.hexdigest()
  with open(path, "rb") as f:
    return "sha256:" + hashlib.sha256(f.read()).hexdigest()


def package_files(module_name: str) -> list[tuple[str, str]]:
  """(package directory, relative path) of every .py file of `module_name`'s top-level
  package, sorted; [] for a module that is not in a package."""
  top = sys.modules.get(module_name.partition(".")[0])
  out = []
  for root in getattr(top, "__path__", None) or ():
    for d, dirs, files in os.walk(root):
      dirs[:] = sorted(x for x in dirs if x != "__pycache__")
      out += [(root, os.path.relpath(os.path.join(d, f), root)) for f in files
              if f.endswith(".py")]
  return sorted(out, key=lambda x: x[1])


def _checked(cls, where: str) -> type[Task]:
  if not (isinstance(cls, type) and issubclass(cls, Task)):
    raise UserError(f"task {where}: {cls!r} is not a subclass of depthscale.tasks.Task")
  if getattr(cls, "__abstractmethods__", None):
    raise UserError(f"task {where}: {cls.__name__} does not define "
                    f"{', '.join(sorted(cls.__abstractmethods__))} (the Task contract)")
  return cls


def _load_file(path: str):
  path = os.path.abspath(os.path.expanduser(path))
  if path in _FILES:
    return _FILES[path]
  if not os.path.isfile(path):
    raise UserError(f"task file {path}: no such file")
  name = "depthscale_user_task_" + hashlib.sha1(path.encode()).hexdigest()[:12]
  spec = importlib.util.spec_from_file_location(name, path)
  module = importlib.util.module_from_spec(spec)
  sys.modules[name] = module  # dataclasses and pickling look the module up by name
  try:
    spec.loader.exec_module(module)
  except (Exception, SystemExit, KeyboardInterrupt) as e:  # the user's file: one line
    del sys.modules[name]
    raise UserError(f"task file {path} failed to load: {_exit_what(e)}") from None
  _FILES[path] = module
  return module


def _load_module(name: str):
  try:
    return importlib.import_module(name)
  except ModuleNotFoundError as e:
    if e.name and name.startswith(e.name):  # the module itself, not one it imports
      raise UserError(f"task module {name!r} is not importable (install its package, or "
                      "add its directory to PYTHONPATH)") from None
    raise UserError(f"task module {name!r} failed to load: {type(e).__name__}: {e}") from None
  except (Exception, SystemExit, KeyboardInterrupt) as e:
    raise UserError(f"task module {name!r} failed to load: {_exit_what(e)}") from None


def _load_entry_point(ep):
  try:
    return ep.load()
  except (Exception, SystemExit, KeyboardInterrupt) as e:
    raise UserError(f"task entry point {ep.name!r} ({ep.value}) failed to load: "
                    f"{_exit_what(e)}") from None


def _exit_what(e: BaseException) -> str:
  """An import's failure in words; a sys.exit() or an interrupt while importing is named
  (it would otherwise end the command with its status, as if all were well)."""
  if isinstance(e, SystemExit):
    return f"it called sys.exit({e.code!r}) while being imported; remove that call"
  if isinstance(e, KeyboardInterrupt):
    return "KeyboardInterrupt while it was being imported"
  return f"{type(e).__name__}: {' '.join(str(e).split())}"
