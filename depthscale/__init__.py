"""depthscale: grids of small transformers trained as one program per accelerator."""
from depthscale import threefry

threefry.register()  # before any program is lowered (depthscale/threefry.py)
