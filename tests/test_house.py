"""The house's rules, checked from the package's own imports (module-level and deferred):
the layer rules written down once here, covering every module of the package, no import
cycle, no module over 300 lines, a report that needs no JAX. A planted violation must
fail them."""
from __future__ import annotations

import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.join(ROOT, "depthscale")
MAX_LINES = 300

# importer -> packages it must never import (the floors above it, or beside it). Every
# module of the package falls under one entry (test_every_module_has_a_layer).
ABOVE = ("depthscale.config", "depthscale.bench")  # they read the floors below, never back
LAYERS = {
    "depthscale.errors": ("depthscale.tasks", "depthscale.model", "depthscale.core",
                          "depthscale.sweep", "depthscale.io", "depthscale.report",
                          "depthscale.devices", "depthscale.threefry") + ABOVE,  # imports none
    "depthscale.devices": ("depthscale.tasks", "depthscale.model", "depthscale.core",
                           "depthscale.sweep", "depthscale.io", "depthscale.report") + ABOVE,
    # JAX's random bits lowered unrolled on CPU: registered by every package that draws
    "depthscale.threefry": ("depthscale.tasks", "depthscale.model", "depthscale.core",
                            "depthscale.sweep", "depthscale.io", "depthscale.report",
                            "depthscale.devices") + ABOVE,
    "depthscale.tasks": ("depthscale.model", "depthscale.core", "depthscale.sweep",
                         "depthscale.io", "depthscale.report") + ABOVE,
    "depthscale.model": ("depthscale.tasks", "depthscale.core", "depthscale.sweep",
                         "depthscale.io", "depthscale.report") + ABOVE,
    "depthscale.core": ("depthscale.sweep", "depthscale.io", "depthscale.report") + ABOVE,
    "depthscale.io": ("depthscale.core", "depthscale.model", "depthscale.sweep",
                      "depthscale.report") + ABOVE,
    "depthscale.report": ("depthscale.core", "depthscale.model", "depthscale.sweep") + ABOVE,
    # valid names from the registries below (a sweep's plan strategies too), never the
    # study that resolves the config, nor what runs it
    "depthscale.config": ("depthscale.sweep.study", "depthscale.sweep.runner",
                          "depthscale.bench"),
    "depthscale.sweep": ("depthscale.bench",),
    "depthscale.bench": (),  # below the CLI only
    "depthscale.cli": (),  # the top floor
}
CLI = "depthscale.cli"  # nothing outside it imports it (the rule for every entry above)
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


def unplaced(mods) -> list[str]:
  """The modules under no entry of LAYERS (the package's own empty __init__ aside)."""
  return sorted(m for m in mods if m != "depthscale" and not any(within(m, p) for p in LAYERS))


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


def test_every_module_has_a_layer():
  g, _ = graph()
  assert unplaced(g) == []
  assert g["depthscale"] == set()  # the package's __init__ imports nothing: no floor
  assert unplaced([*g, "depthscale.stray", "depthscale.configs.x"]) == [
      "depthscale.configs.x", "depthscale.stray"]  # planted: a module with no rule fails


def test_no_import_cycle():
  g, _ = graph()
  assert cycles(g) == []


def test_no_module_over_300_lines():
  long = {m: n for m, p in modules().items() if (n := sum(1 for _ in open(p))) > MAX_LINES}
  assert long == {}


def report_reach(g) -> set[str]:
  """What every module of depthscale/report/ imports, directly or not (its __init__ loads
  its names on first use, so the package alone reaches nothing)."""
  return set().union(*(reaches(g, m) for m in g if m.split(".")[:2] == ["depthscale", "report"]))


def test_the_report_needs_no_jax():
  g, third = graph()
  for m in report_reach(g):
    assert not third[m] & set(JAX), (m, third[m] & set(JAX))


def test_a_planted_violation_fails_the_rules():
  """The checks are not vacuous: one planted import breaks each."""
  g, third = graph()
  planted = {m: set(d) for m, d in g.items()}
  planted["depthscale.core.train"].add("depthscale.sweep.runner")  # core reaching up
  planted["depthscale.model.transformer"].add("depthscale.cli.app")
  planted["depthscale.sweep.plan"].add("depthscale.cli.common")  # the sweep reaching the CLI
  planted["depthscale.errors"].add("depthscale.devices")
  assert layer_breaks(planted) == [
      "depthscale.core.train imports depthscale.sweep.runner",
      "depthscale.errors imports depthscale.devices",
      "depthscale.model.transformer imports the CLI (depthscale.cli.app)",
      "depthscale.sweep.plan imports the CLI (depthscale.cli.common)"]
  assert any({"depthscale.core.train", "depthscale.sweep.runner"} <= set(c)
             for c in cycles(planted))  # the runner reaches core.train: a cycle
  planted["depthscale.report.fits"].add("depthscale.io.checkpoint")  # orbax, hence JAX
  assert "orbax" in set().union(*(third[m] for m in report_reach(planted)))
