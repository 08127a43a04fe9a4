"""The environment the tests run in is the locked one (requirements.lock), so the figures
in README and BUILD_NOTES.md are reproduced with the versions they came from."""
import os
import re
from importlib import metadata

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def normalize(name: str) -> str:
  return re.sub(r"[-_.]+", "-", name).lower()


def locked() -> dict[str, str]:
  pins = {}
  with open(os.path.join(ROOT, "requirements.lock")) as f:
    for line in f:
      line = line.split("#")[0].strip()
      if line:
        name, sep, version = line.partition("==")
        assert sep and version, f"not an exact pin: {line!r}"
        pins[normalize(name)] = version
  return pins


def test_every_dependency_is_pinned_exactly():
  pins = locked()
  for direct in ("jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "numpy", "chex",
                 "ml-collections", "wandb", "submitit", "pip", "setuptools"):
    assert direct in pins, direct
  requires = metadata.requires("depthscale") or []
  for req in requires:  # every requirement of setup.cfg (and its test extra) is locked
    name = normalize(re.split(r"[<>=!~;\[ ]", req, maxsplit=1)[0])
    assert name in pins, f"{name} (setup.cfg) is not in requirements.lock"


def test_installed_versions_match_the_lock():
  """Fails when the suite runs outside `make test`'s venv or after an unlocked upgrade:
  reinstall with `rm -rf .venv && make test`."""
  installed = {normalize(d.metadata["Name"]): d.version for d in metadata.distributions()}
  wrong = {n: (v, installed.get(n)) for n, v in locked().items() if installed.get(n) != v}
  assert not wrong, f"locked vs installed: {wrong}"
