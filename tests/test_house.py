"""The house's rules, checked from the package's own imports (module-level and deferred):
the layer rules written down once here, no import cycle, no module over 300 lines, a
report that needs no JAX. A planted violation must fail them."""
from __future__ import annotations

import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.join(ROOT, "depthscale")
MAX_LINES = 300

# importer -> packages it must never import (the floors above it, or beside it)
LAYERS = {
    "depthscale.tasks": ("depthscale.model", "depthscale.core", "depthscale.sweep",
                         "depthscale.io", "depthscale.report"),
    "depthscale.model": ("depthscale.tasks", "depthscale.core", "depthscale.sweep",
                         "depthscale.io", "depthscale.report"),
    "depthscale.core": ("depthscale.sweep", "depthscale.io", "depthscale.report"),
    "depthscale.io": ("depthscale.core", "depthscale.model", "depthscale.sweep",
                      "depthscale.report"),
    "depthscale.report": ("depthscale.core", "depthscale.model", "depthscale.sweep"),
}
CLI = "depthscale.cli"  # nothing outside it imports it
JAX = ("jax", "flax", "optax", "orbax", "chex")


def modules() -> dict[str, str]:
  out = {}
  for d, _, files in os.walk(PKG):
    for f in files:
      if f.endswith(".py"):
        path = os.path.join(d, f)
        name = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
        out[name.removesuffix(".__init__")] = path
  return out


def imports(path: str, mods) -> tuple[set[str], set[str]]:
  """(depthscale modules, third-party top-level packages) that `path` imports anywhere."""
  ours, theirs = set(), set()
  for node in ast.walk(ast.parse(open(path).read())):
    if isinstance(node, ast.Import):
      names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom) and not node.level:  # a submodule, else the module
      names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in mods else node.module
               for a in node.names]
    else:
      continue
    for n in names:
      if n.startswith("depthscale"):
        while n not in mods and "." in n:
          n = n.rpartition(".")[0]
        if n in mods and n != "depthscale":
          ours.add(n)
      else:
        theirs.add(n.split(".")[0])
  return ours, theirs


def graph():
  mods = modules()
  parsed = {m: imports(p, mods) for m, p in mods.items()}
  return ({m: ours - {m} for m, (ours, _) in parsed.items()},
          {m: theirs for m, (_, theirs) in parsed.items()})


def within(m: str, pkg: str) -> bool:
  return m == pkg or m.startswith(pkg + ".")


def layer_breaks(g) -> list[str]:
  out = []
  for m, deps in sorted(g.items()):
    for d in sorted(deps):
      for pkg, banned in LAYERS.items():
        if within(m, pkg) and any(within(d, b) for b in banned):
          out.append(f"{m} imports {d}")
      if within(d, CLI) and not within(m, CLI):
        out.append(f"{m} imports the CLI ({d})")
  return out


def cycles(g) -> list[list[str]]:
  """Strongly connected components of more than one module (Tarjan)."""
  index, low, stack, on, out = {}, {}, [], set(), []

  def visit(v):
    index[v] = low[v] = len(index)
    stack.append(v)
    on.add(v)
    for w in g.get(v, ()):
      if w not in index:
        visit(w)
        low[v] = min(low[v], low[w])
      elif w in on:
        low[v] = min(low[v], index[w])
    if low[v] == index[v]:
      comp = []
      while True:
        w = stack.pop()
        on.discard(w)
        comp.append(w)
        if w == v:
          break
      if len(comp) > 1:
        out.append(sorted(comp))

  for v in sorted(g):
    if v not in index:
      visit(v)
  return out


def reaches(g, start: str) -> set[str]:
  seen, todo = set(), [start]
  while todo:
    m = todo.pop()
    if m not in seen:
      seen.add(m)
      todo.extend(g.get(m, ()))
  return seen


def test_the_layer_rules_hold():
  g, _ = graph()
  assert layer_breaks(g) == []


def test_no_import_cycle():
  g, _ = graph()
  assert cycles(g) == []


def test_no_module_over_300_lines():
  long = {m: n for m, p in modules().items() if (n := sum(1 for _ in open(p))) > MAX_LINES}
  assert long == {}


def test_the_report_needs_no_jax():
  g, third = graph()
  for m in reaches(g, "depthscale.report"):
    assert not third[m] & set(JAX), (m, third[m] & set(JAX))


def test_a_planted_violation_fails_the_rules():
  """The checks are not vacuous: one planted import breaks each."""
  g, third = graph()
  planted = {m: set(d) for m, d in g.items()}
  planted["depthscale.core.train"].add("depthscale.sweep.runner")  # core reaching up
  planted["depthscale.model.transformer"].add("depthscale.cli.app")
  assert layer_breaks(planted) == [
      "depthscale.core.train imports depthscale.sweep.runner",
      "depthscale.model.transformer imports the CLI (depthscale.cli.app)"]
  assert any({"depthscale.core.train", "depthscale.sweep.runner"} <= set(c)
             for c in cycles(planted))  # the runner reaches core.train: a cycle
  planted["depthscale.report.fits"].add("depthscale.io.checkpoint")  # orbax, hence JAX
  assert "orbax" in set().union(*(third[m] for m in reaches(planted, "depthscale.report")))
