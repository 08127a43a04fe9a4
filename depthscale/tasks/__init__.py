"""Task library: `make(name, **options) -> Task`. See base.py for the contract."""
from __future__ import annotations

from depthscale.tasks.base import Batch, Task
from depthscale.tasks.khop import KHop
from depthscale.tasks.reachability import Reachability
from depthscale.tasks.retrieval import Retrieval
from depthscale.tasks.word_problem import WordProblem
from depthscale.errors import UserError

REGISTRY: dict[str, type[Task]] = {
    "word_problem": WordProblem,
    "khop": KHop,
    "reachability": Reachability,
    "retrieval": Retrieval,
}


def make(name: str, **options) -> Task:
  """Build task `name` with `options`; a one-line ValueError on bad names or options."""
  if name not in REGISTRY:
    raise UserError(f"unknown task {name!r}; valid tasks: {', '.join(sorted(REGISTRY))}")
  return REGISTRY[name](**options)


__all__ = ["Batch", "Task", "make", "REGISTRY"]
