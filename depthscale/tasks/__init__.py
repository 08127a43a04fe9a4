"""Task library: `make(spec, **options) -> Task`. See base.py for the contract and
sources.py for where a task may come from (built-in, entry point, file, module)."""
from __future__ import annotations

from depthscale import threefry  # noqa: F401  (random bits lowered unrolled on CPU)

from depthscale.tasks.base import Batch, Task
from depthscale.tasks.khop import KHop
from depthscale.tasks.reachability import Reachability
from depthscale.tasks.retrieval import Retrieval
from depthscale.tasks.word_problem import WordProblem
from depthscale.tasks import sources
from depthscale.errors import UserError

REGISTRY: dict[str, type[Task]] = {
    "word_problem": WordProblem,
    "khop": KHop,
    "reachability": Reachability,
    "retrieval": Retrieval,
}


def make(name: str, **options) -> Task:
  """Build task `name` (a name, FILE.py:CLASS or MODULE:CLASS) with `options`; a one-line
  UserError on bad specs or options. A user's task that fails in its constructor is one
  line too (naming the spec); a built-in's failure other than a UserError is a bug."""
  spec = name
  cls = sources.find(spec, REGISTRY)
  if spec in REGISTRY:
    return cls(**options)
  try:
    return cls(**options)
  except UserError:
    raise
  except Exception as e:
    raise UserError(f"task {spec}: {cls.__name__}({', '.join(f'{k}={v!r}' for k, v in options.items())})"
                    f" failed: {type(e).__name__}: {e}") from None


def origin(spec: str) -> str:
  """Where task `spec` comes from, in words."""
  return sources.origin(spec, REGISTRY)


def digest(spec: str, single_file: bool = False) -> str:
  """The identity of task `spec`'s source (sources.digest)."""
  return sources.digest(spec, REGISTRY, single_file)


def names() -> list[str]:
  """Every task that has a name: the built-ins, then the installed entry points."""
  return sorted(REGISTRY) + sorted(set(sources.entry_points()) - set(REGISTRY))


__all__ = ["Batch", "Task", "make", "origin", "digest", "names", "REGISTRY"]
