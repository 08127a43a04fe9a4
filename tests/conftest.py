"""Shared test settings: numpy-style rank promotion is an error, as in nanodo."""
import jax

jax.config.update("jax_numpy_rank_promotion", "raise")
