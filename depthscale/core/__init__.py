"""The models axis M: stacking, padding and training many transformers as one program."""
from depthscale import threefry  # noqa: F401  (random bits lowered unrolled on CPU)
