"""docs/config.md is the reference generated from each config field's one declaration
(config/fields.py), and every field of the defaults has one, with a meaning."""
from __future__ import annotations

import os

import ml_collections

from depthscale import config
from depthscale.config import fields, reference

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "config.md")


def test_docs_config_md_is_the_generated_reference():
  with open(DOC) as f:
    text = f.read()
  assert text == reference.markdown(), (
      f"docs/config.md is not the reference the field declarations give; regenerate it "
      f"with `{reference.COMMAND}` (from the repository root)")


def test_every_field_has_a_declaration_with_a_meaning():
  missing = reference.undeclared()
  assert not missing, (
      f"config fields set without a declaration: {', '.join(missing)}; declare each with "
      "`field(c, \"section.name\", default, \"meaning\")` (depthscale/config/fields.py) in "
      f"its section's add(), then `{reference.COMMAND}`")


def test_a_plain_field_is_caught(monkeypatch):
  def planted():
    c = config.defaults()
    c.train.planted = 1
    c.extra = ml_collections.ConfigDict(dict(a=1, b="x"))  # a section, its fields undeclared
    c.empty = ml_collections.ConfigDict()
    return c
  before = set(reference.undeclared())
  monkeypatch.setattr(reference, "defaults", planted)
  assert set(reference.undeclared()) - before == {"empty", "extra.a", "extra.b", "train.planted"}


def test_a_field_records_its_default_and_meaning():
  c = config.defaults()
  steps = fields.REGISTRY["train.steps"]
  assert (steps.path, steps.default, c.train.steps) == ("train.steps", 1000, 1000)
  assert steps.meaning and fields.SECTIONS["train"].meaning
  assert fields.REGISTRY["report.companions"].default == {}  # a snapshot, not the live dict
