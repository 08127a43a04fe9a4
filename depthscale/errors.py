"""UserError: a mistake the user can fix (config, options, paths, devices, workdir).

The command line turns a UserError, and only a UserError, into one line and exit status
2. Any other exception is a bug of ours and keeps its traceback. UserError subclasses
ValueError so that library callers catching ValueError keep working.
"""


class UserError(ValueError):
  """Something the user gave is wrong; the message is one line saying what to change."""


class ConfigError(UserError):
  """A user's config is wrong; the message is one line naming the field."""
