"""Study configs: every field a study may set, its default and meaning (one module per
section: grid, model, train, evaluation, plan, run, report, each with its checks; each field
declared once by fields.field, docs/config.md generated from them by reference), loading
`file.py[:arg]` with `--config.a.b=v` overrides, and `validate`, which checks every value
in one line per problem before anything compiles. Valid names come from the registries of
the code that acts on them."""
from depthscale.config.base import ConfigError
from depthscale.config.loading import (FREE_FORM, anchor_task_file, apply_override,
                                       check_fields, load, merge)
from depthscale.config.sections import defaults, validate
from depthscale.config.variants import cpu_scale, smoke, study_args

__all__ = ["ConfigError", "FREE_FORM", "anchor_task_file", "apply_override", "check_fields",
           "cpu_scale", "defaults", "load", "merge", "smoke", "study_args", "validate"]
