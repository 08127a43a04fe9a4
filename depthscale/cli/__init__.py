"""The `depthscale` command line (entry point `depthscale.cli:main`): app.py holds the
parser and exit codes, sweep.py the sweep's commands, common.py what launch/slurm.py
shares. Nothing in the library imports this package."""
from depthscale.cli.app import main  # noqa: F401
