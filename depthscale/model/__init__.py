"""One transformer, written for one model. Knows nothing of the models axis M."""
from depthscale import threefry  # noqa: F401  (random bits lowered unrolled on CPU)
from depthscale.model.transformer import Arch, ModelConfig, Transformer, arch_for

__all__ = ["Arch", "ModelConfig", "Transformer", "arch_for"]
