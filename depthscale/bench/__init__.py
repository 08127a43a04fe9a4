"""Benchmarks of the engine, and what a task's sampler costs (task_cost.py).

Each preset module registers its presets (registry.py: a run and a one-line summary per
name); `depthscale bench --preset NAME` looks one up. The engine presets and `mixed` time
programs built by core/program.py; `refill` and `halving` train whole studies.
"""
from depthscale.bench import design, engine, mixed, studies  # noqa: F401  (each registers its presets)
from depthscale.bench.registry import Bench, Options, get, names

__all__ = ["Bench", "Options", "get", "names"]
