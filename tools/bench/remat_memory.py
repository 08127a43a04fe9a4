"""Memory that model.remat="block" saves in one train step, from XLA's compiled memory
analysis (nothing runs): a group of 8 models, depth 8, width 256 (4 heads), sequence 64,
batch 32, associative recall, via core.program.make_train_steps (the sweep's program).

  .venv/bin/python tools/bench/remat_memory.py [--depth 8 --width 256 --seq 64 --batch 32
                                          --models 8 --compute-dtype float32 --repeats 1]

Prints, per remat setting, XLA's temp (live intermediates), argument, output and
generated-code sizes, then the temp saved. Figures in BUILD_NOTES.md (issue 11).
"""
from __future__ import annotations

import argparse
import time

import jax

from depthscale import tasks
from depthscale.core import ensemble, program, train
from depthscale.core.ensemble import ModelSpec

MIB = 2 ** 20


def analyse(remat: str, a) -> dict:
  task = tasks.make("khop", k=1)
  specs = [ModelSpec(a.depth, a.width, a.heads, seed=i, repeats=a.repeats)
           for i in range(a.models)]
  compute_dtype = None if a.compute_dtype == "float32" else a.compute_dtype
  cfg = ensemble.group_config(specs, max_len=task.seq_len(a.seq),
                              output_dim=task.output_dim(a.seq), vocab=task.input_vocab,
                              remat=remat, attention="einsum", compute_dtype=compute_dtype)
  tcfg = train.TrainConfig(batch_size=a.batch, length=a.seq, total_steps=100)
  state = jax.eval_shape(lambda: train.init_state(ensemble.init_params(specs, cfg), tcfg))
  hp = jax.eval_shape(lambda: train.stack_hparams(specs))
  arch = jax.eval_shape(lambda: ensemble.stack_arch(specs, cfg))
  steps = program.make_train_steps(task, cfg, tcfg, a.steps)
  t0 = time.perf_counter()
  compiled = steps.lower(state, hp, arch, jax.ShapeDtypeStruct((), "int32")).compile()
  mem = compiled.memory_analysis()
  return dict(remat=remat, compile_s=time.perf_counter() - t0,
              temp=mem.temp_size_in_bytes, args=mem.argument_size_in_bytes,
              out=mem.output_size_in_bytes, alias=mem.alias_size_in_bytes,
              code=mem.generated_code_size_in_bytes)


def main():
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--depth", type=int, default=8)
  p.add_argument("--width", type=int, default=256)
  p.add_argument("--heads", type=int, default=4)
  p.add_argument("--seq", type=int, default=64)
  p.add_argument("--batch", type=int, default=32)
  p.add_argument("--models", type=int, default=8)
  p.add_argument("--repeats", type=int, default=1)
  p.add_argument("--steps", type=int, default=10, help="max steps of the program")
  p.add_argument("--compute-dtype", default="float32", choices=("float32", "bfloat16"))
  a = p.parse_args()
  print(f"jax {jax.__version__} on {jax.default_backend()} ({jax.devices()[0].device_kind}); "
        f"{a.models} models, depth {a.depth} x{a.repeats}, width {a.width}, seq {a.seq}, "
        f"batch {a.batch}, {a.compute_dtype}")
  rows = [analyse(r, a) for r in ("none", "block")]
  for r in rows:
    print(f"remat={r['remat']:5s}: temp {r['temp'] / MIB:8.1f} MiB, arguments "
          f"{r['args'] / MIB:6.1f} MiB, outputs {r['out'] / MIB:6.1f} MiB (aliased "
          f"{r['alias'] / MIB:.1f}), code {r['code'] / MIB:.2f} MiB; compiled in "
          f"{r['compile_s']:.1f} s")
  none, block = rows
  print(f"temp saved by remat=block: {(none['temp'] - block['temp']) / MIB:.1f} MiB "
        f"({100 * (1 - block['temp'] / none['temp']):.0f}%)")


if __name__ == "__main__":
  main()
