"""The guide cannot go stale: every ```sh runnable``` block of README.md and docs/*.md runs
(docs/index.md, "Runnable code blocks", states the convention), every relative link and
#anchor resolves, and no page names a numbered work session."""
import glob
import os
import re
import subprocess
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = sorted([os.path.join(ROOT, "README.md")] + glob.glob(os.path.join(ROOT, "docs", "*.md")))
BLOCK_TIMEOUT_S = 120
# Pages other engineers are writing; a link to one is checked once it exists.
PENDING = {os.path.join(ROOT, "docs", "config.md"), os.path.join(ROOT, "tools", "README.md")}

FENCE = re.compile(r"^(`{3,}|~{3,})(.*)$")


def rel(path: str) -> str:
  return os.path.relpath(path, ROOT)


def blocks(text: str):
  """(info string, body, first line number) of every fenced block."""
  out, lines, i = [], text.splitlines(), 0
  while i < len(lines):
    m = FENCE.match(lines[i].strip())
    if not m:
      i += 1
      continue
    fence, info, start, body = m.group(1), m.group(2).strip(), i + 1, []
    i += 1
    while i < len(lines) and not lines[i].strip().startswith(fence):
      body.append(lines[i])
      i += 1
    out.append((info, "\n".join(body) + "\n", start))
    i += 1
  return out


def runnable(page: str):
  return [(body, line) for info, body, line in blocks(open(page).read())
          if info.split() == ["sh", "runnable"]]


def prose(text: str) -> str:
  """`text` without its fenced blocks and inline code (links there are not links)."""
  kept, inside = [], None
  for line in text.splitlines():
    m = FENCE.match(line.strip())
    if inside is None and m:
      inside = m.group(1)
    elif inside is not None and line.strip().startswith(inside):
      inside = None
    elif inside is None:
      kept.append(line)
  return re.sub(r"`[^`\n]*`", "", "\n".join(kept))


def anchor(heading: str) -> str:
  """GitHub's id for a heading: a link's text kept, lower case, everything but letters,
  digits, _, - and spaces dropped, spaces to -."""
  h = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
  return re.sub(r"[^\w\- ]", "", h).replace(" ", "-")


def headings(page: str) -> list:
  """The text of every ATX heading outside fenced blocks."""
  out, inside = [], None
  for line in open(page).read().splitlines():
    m = FENCE.match(line.strip())
    if inside is None and m:
      inside = m.group(1)
    elif inside is not None and line.strip().startswith(inside):
      inside = None
    elif inside is None and re.match(r"#{1,6} ", line):
      out.append(line.lstrip("#").strip())
  return out


def anchors(page: str) -> set:
  """Every heading's id; a repeated one gets -1, -2, ... as GitHub numbers them."""
  seen, out = {}, set()
  for h in headings(page):
    a = anchor(h)
    n = seen.get(a, 0)
    seen[a] = n + 1
    out.add(a if n == 0 else f"{a}-{n}")
  return out


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def links(page: str):
  return LINK.findall(prose(open(page).read()))


def test_the_pages_exist_and_some_blocks_are_runnable():
  names = {rel(p) for p in PAGES}
  for page in ("README.md", "docs/index.md", "docs/running.md", "docs/own_task.md",
               "docs/clusters.md", "docs/gpus.md", "docs/report.md", "docs/refused.md",
               "docs/performance.md"):
    assert page in names, page
  assert sum(len(runnable(p)) for p in PAGES) >= 4


def test_relative_links_and_anchors_resolve():
  bad = []
  for page in PAGES:
    for target in links(page):
      if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: ...
        continue
      path, _, frag = target.partition("#")
      dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
      if not os.path.exists(dest):
        if dest not in PENDING:
          bad.append(f"{rel(page)}: {target} (no such file)")
        continue
      if frag and dest.endswith(".md") and frag not in anchors(dest):
        bad.append(f"{rel(page)}: {target} (no heading #{frag} in {rel(dest)})")
  assert not bad, "\n".join(bad)


REPO_PATH = re.compile(r"(?<![\w/.~$-])(?:depthscale|docs|experiments|launch|tests|tools)/[\w./-]*\w")


def test_named_repo_paths_exist():
  """A file or folder of the repo named anywhere on a page (tools/gpu/gpu_check.sh,
  experiments/a5_depth.py) exists: a moved script cannot leave the guide behind."""
  bad = []
  for page in PAGES:
    for i, line in enumerate(open(page).read().splitlines(), 1):
      for path in REPO_PATH.findall(line):
        full = os.path.join(ROOT, path)
        if not os.path.exists(full) and full not in PENDING:
          bad.append(f"{rel(page)}:{i}: {path}")
  assert not bad, "\n".join(bad)


def test_no_page_names_a_numbered_session():
  bad = [f"{rel(p)}:{i}: {line.strip()}" for p in PAGES
         for i, line in enumerate(open(p).read().splitlines(), 1)
         if re.search(r"\bsessions?\s+\d", line, re.I)]
  assert not bad, "name a date, version or commit instead:\n" + "\n".join(bad)


def test_runnable_runs_name_smoke_studies():
  """A `depthscale run` in a runnable block trains a :smoke study (the docs test stays cheap)."""
  for page in PAGES:
    for body, line in runnable(page):
      for cmd in re.findall(r"depthscale run\b[^\n]*(?:\\\n[^\n]*)*", body):
        spec = re.search(r"--config[ =](\S+)", cmd)
        assert spec and "smoke" in spec.group(1).split(":")[-1].split(","), \
            f"{rel(page)}:{line}: {cmd.splitlines()[0]}"


@pytest.mark.slow
@pytest.mark.parametrize("page", [rel(p) for p in PAGES if runnable(p)])
def test_runnable_blocks_run(page, tmp_path):
  """Each page's runnable blocks in order, by bash -e, in one fresh directory."""
  os.symlink(os.path.join(ROOT, "experiments"), tmp_path / "experiments")
  venv_bin = os.path.join(ROOT, ".venv", "bin")
  env = dict(os.environ, REPO=ROOT, WANDB_MODE="disabled",
             DEPTHSCALE_CACHE=str(tmp_path / ".cache"),
             PATH=venv_bin + os.pathsep + os.environ.get("PATH", ""))
  for body, line in runnable(os.path.join(ROOT, page)):
    start = time.monotonic()
    p = subprocess.run(["bash", "-e", "-c", body], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=BLOCK_TIMEOUT_S)
    assert p.returncode == 0, (f"{page}:{line} exited {p.returncode} after "
                               f"{time.monotonic() - start:.0f} s\n{body}\n"
                               f"stdout: {p.stdout[-2000:]}\nstderr: {p.stderr[-2000:]}")
