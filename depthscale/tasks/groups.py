"""Finite groups as permutation groups: named groups, `perm:` generators in cycle notation,
direct products; elements by closure, the product table by composition.

Convention (sympy's): a*b applies a first, then b, i.e. (a*b)[i] = b[a[i]]. A group is
its elements (int32 [G, degree], lexicographic, identity first) and a default generating
set. Must not import depthscale.model or depthscale.core.
"""
from __future__ import annotations

import dataclasses
import itertools
import math
import re

import numpy as np

from depthscale.errors import UserError

NAMED = "'A4', 'A5', 'S3', 'S4', 'S5', 'parity', 'Z<m>' (2 <= m <= 1024)"
SYNTAX = (f"{NAMED}, a direct product of those joined by 'x' (e.g. 'A4xZ5'), or "
          "'perm:' and generators in cycle notation (e.g. 'perm:(0 1 2 3 4),(0 1 2)')")
MAX_CYCLIC = 1024
MAX_ORDER = 5040  # closure and the [G, G] table stay small
MAX_DEGREE = 64
MAX_TABLE_WORK = 2 * 10**8  # order^2 x degree: the [G, G] table built by composition (S7: 1.8e8)

# Default generating sets of the named groups, in cycle notation (m-cycle for Z<m>).
_NAMED_GENERATORS = {"A4": "(0 1 2),(0 1)(2 3)", "A5": "(0 1 2 3 4),(0 1 2)",
                     "S3": "(0 1),(0 1 2)", "S4": "(0 1),(0 1 2 3)",
                     "S5": "(0 1),(0 1 2 3 4)", "parity": "(0 1)"}


@dataclasses.dataclass(frozen=True)
class PermGroup:
  """elements: int32 [G, degree], sorted, identity first; generators: int32 [K, degree];
  table: the product table where a closed form gives it (Z<m>), else None (composition)."""
  elements: np.ndarray
  generators: np.ndarray
  table: np.ndarray | None = None

  def product_table(self) -> np.ndarray:
    """int32 [G, G]: index of a*b (see multiplication_table)."""
    return self.table if self.table is not None else multiplication_table(self.elements)

  @property
  def order(self) -> int:
    return self.elements.shape[0]

  def index(self, perms_KxD: np.ndarray) -> np.ndarray:
    """The element index of each permutation (a one-line error for one not in the group)."""
    where = {row.tobytes(): i for i, row in enumerate(self.elements)}
    out = [where.get(np.asarray(p, np.int32).tobytes()) for p in perms_KxD]
    missing = [k + 1 for k, i in enumerate(out) if i is None]
    if missing:
      raise UserError(f"word_problem: generator {missing[0]} (counting from 1) is not an "
                      "element of the group")
    return np.asarray(out, np.int32)


def _parity_of(perm) -> int:
  n = len(perm)
  return sum(perm[i] > perm[j] for i in range(n) for j in range(i + 1, n)) % 2


def _sorted(perms_GxD: np.ndarray) -> np.ndarray:
  """The rows in lexicographic order."""
  return perms_GxD[np.lexsort(perms_GxD.T[::-1])]


def parse_cycles(text: str, degree: int | None = None) -> np.ndarray:
  """int32 [K, degree] from "(0 1 2),(0 1)(2 3)": each comma-separated item is a product of
  disjoint cycles on points 0, 1, ...; '()' is the identity. degree defaults to the largest
  point + 1."""
  items = [s.strip() for s in text.split(",")] if text.strip() else []
  cycles_K = []
  for item in items:
    if not re.fullmatch(r"(\(\s*(\d+(\s+\d+)*)?\s*\))+", item):
      raise UserError(f"word_problem: generator {item!r} is not in cycle notation, e.g. "
                      "'(0 1 2)(3 4)' (spaces between points, cycles in parentheses)")
    cycles = [[int(p) for p in c.split()] for c in re.findall(r"\(([^)]*)\)", item)]
    points = [p for c in cycles for p in c]
    if len(points) != len(set(points)):
      raise UserError(f"word_problem: generator {item!r}: its cycles must be disjoint")
    cycles_K.append(cycles)
  if not cycles_K:
    raise UserError("word_problem: 'perm:' needs at least one generator, e.g. "
                    "'perm:(0 1 2 3 4),(0 1 2)'")
  top = max((p for cyc in cycles_K for c in cyc for p in c), default=0) + 1
  if degree is None:
    degree = top
    if degree > MAX_DEGREE:
      raise UserError(f"word_problem: generators move points up to {top - 1}; 'perm:' groups "
                      f"act on at most {MAX_DEGREE} points (0..{MAX_DEGREE - 1})")
  elif top > degree:
    raise UserError(f"word_problem: generators move point {top - 1}, but the group acts on "
                    f"points 0..{degree - 1}")
  perms = []
  for cycles in cycles_K:
    p = list(range(degree))
    for c in cycles:
      for a, b in zip(c, c[1:] + c[:1]):
        p[a] = b
    perms.append(p)
  return np.asarray(perms, np.int32)


def closure(generators_KxD: np.ndarray) -> np.ndarray:
  """int32 [G, degree]: every product of the generators, sorted (identity first)."""
  degree = generators_KxD.shape[1]
  identity = tuple(range(degree))
  seen, frontier = {identity}, [identity]
  gens = [tuple(int(v) for v in g) for g in generators_KxD]
  while frontier:
    nxt = []
    for a in frontier:
      for g in gens:
        ag = tuple(g[a[i]] for i in range(degree))  # apply a, then g
        if ag not in seen:
          seen.add(ag)
          nxt.append(ag)
          if len(seen) > MAX_ORDER:
            raise UserError(f"word_problem: the generators make a group of more than "
                            f"{MAX_ORDER} elements; give a smaller group")
    frontier = nxt
  return _sorted(np.asarray(list(seen), np.int32))


def _named(name: str) -> PermGroup:
  if name in ("A4", "A5", "S3", "S4", "S5"):
    degree = int(name[1])
    perms = list(itertools.permutations(range(degree)))  # lexicographic order
    if name[0] == "A":
      perms = [p for p in perms if _parity_of(p) == 0]
    return PermGroup(np.asarray(perms, np.int32), parse_cycles(_NAMED_GENERATORS[name], degree))
  if name == "parity":
    return PermGroup(np.asarray([[0, 1], [1, 0]], np.int32), parse_cycles("(0 1)", 2))
  match = re.fullmatch(r"Z([1-9][0-9]*)", name)
  if match and 2 <= int(match.group(1)) <= MAX_CYCLIC:
    m = int(match.group(1))
    shift_M = np.arange(m, dtype=np.int32)
    elements = ((shift_M[:, None] + shift_M[None, :]) % m).astype(np.int32)  # row s: i -> i+s
    table = ((shift_M[:, None] + shift_M[None, :]) % m).astype(np.int32)  # shifts add
    return PermGroup(elements, elements[1:2], table)  # the generator +1; no [G, G, G] work
  raise UserError(f"word_problem: bad option group={name!r}; valid: {SYNTAX}")


def _product(factors: list[PermGroup]) -> PermGroup:
  """The direct product acting on the disjoint union of the factors' points."""
  offsets = np.cumsum([0] + [f.elements.shape[1] for f in factors])
  degree = int(offsets[-1])
  gens = []
  for f, off in zip(factors, offsets):
    for g in f.generators:
      p = np.arange(degree, dtype=np.int32)
      p[off:off + g.size] = g + off
      gens.append(p)
  order = math.prod(f.order for f in factors)
  if order > MAX_ORDER:
    raise UserError(f"word_problem: the product has {order} elements; at most {MAX_ORDER}")
  parts = [f.elements + off for f, off in zip(factors, offsets)]
  rows = [np.concatenate(combo) for combo in itertools.product(*parts)]
  elements = np.asarray(rows, np.int32)
  return PermGroup(_sorted(elements), np.asarray(gens))


def make_group(spec: str) -> PermGroup:
  """The group named by `spec` (see SYNTAX); a one-line UserError for anything else."""
  if not isinstance(spec, str):
    raise UserError(f"word_problem: option group must be a str ({SYNTAX}), got {spec!r}")
  if spec.startswith("perm:"):
    gens = parse_cycles(spec[len("perm:"):])
    elements = closure(gens)
    if elements.shape[0] < 2:
      raise UserError(f"word_problem: group {spec!r} has one element; give generators that "
                      "move some point")
    return PermGroup(elements, gens)
  names = spec.split("x")
  if len(names) == 1:
    return _named(spec)
  if not all(names):
    raise UserError(f"word_problem: bad option group={spec!r}; valid: {SYNTAX}")
  factors = [_named(n) for n in names]
  order = math.prod(f.order for f in factors)
  degree = sum(f.elements.shape[1] for f in factors)
  if order * order * degree > MAX_TABLE_WORK:  # before building anything of that size
    raise UserError(f"word_problem: group {spec!r} has {order} elements on {degree} points: "
                    f"its product table is {order}^2 x {degree} work, over "
                    f"{MAX_TABLE_WORK:.0e}; give a smaller group")
  return _product(factors)


def multiplication_table(elements_GxD: np.ndarray) -> np.ndarray:
  """int32 [G, G]: table[a, b] = index of a*b, where (a*b)[i] = b[a[i]].

  A ValueError if the rows are not distinct or not closed under composition.
  """
  num = elements_GxD.shape[0]
  where = {row.tobytes(): i for i, row in enumerate(elements_GxD)}
  if len(where) != num:
    raise ValueError("word_problem: elements must be distinct")
  table_GxG = np.empty((num, num), np.int32)
  for a in range(num):
    prod_GxD = np.ascontiguousarray(elements_GxD[:, elements_GxD[a]])  # row b: i -> b[a[i]]
    idx = [where.get(row.tobytes()) for row in prod_GxD]
    if any(i is None for i in idx):
      raise ValueError("word_problem: element set is not closed under composition")
    table_GxG[a] = idx
  return table_GxG
