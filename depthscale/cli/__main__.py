"""`python -m depthscale.cli ...`: the same as the `depthscale` command."""
import sys

from depthscale.cli.app import main

sys.exit(main())
