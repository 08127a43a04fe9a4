"""The guard against silent numeric drift: small studies trained a few dozen steps in
float64 (tools/drift.py) give the losses, parameter norms and held-out losses recorded in
tests/drift.json. Another CPU rounds the last bits differently (float64: ~1e-12 here); a
change to a sampler, the initialisation, the model or the optimizer moves them by orders
of magnitude more. When a change is meant to move the numbers, re-record them."""
import json
import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import drift  # noqa: E402  (tools/ is not a package)

RTOL = 1e-6

with open(drift.RECORD) as f:
  RECORDED = json.load(f)


def _close(name, what, got, want):
  got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
  if got.shape == want.shape:
    print(f"margin drift {name} {what}: largest relative change "
          f"{np.max(np.abs(got - want) / np.abs(want)):.1e} (< {RTOL:g})")
  if got.shape != want.shape or not np.allclose(got, want, rtol=RTOL, atol=0.0):
    worst = np.max(np.abs(got - want) / np.abs(want)) if got.shape == want.shape else None
    pytest.fail(f"{name}: the {what} moved from tests/drift.json (largest relative change "
                f"{worst}, tolerance {RTOL}). If the change is meant to move the studies' "
                f"numbers, re-record with `{drift.COMMAND}` and say why in the commit.",
                pytrace=False)


@pytest.mark.parametrize("name", sorted(drift.CASES))
def test_the_studies_numbers_have_not_moved(name):
  want = RECORDED["cases"][name]
  got = drift.measure(name)
  assert got["models"] == want["models"], "the case's models changed: re-record"
  _close(name, "losses", got["loss"], want["loss"])
  _close(name, "parameter norms", got["param_norm"], want["param_norm"])
  _close(name, "held-out losses", got["eval_loss"], want["eval_loss"])


def test_the_record_is_of_every_case():
  assert sorted(RECORDED["cases"]) == sorted(drift.CASES), f"re-record: {drift.COMMAND}"
