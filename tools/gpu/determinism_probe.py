"""Whether the engine's training is bit-for-bit reproducible on this device under each set
of XLA flags, and whether it runs at all: the question behind `depthscale run`'s
--xla_gpu_deterministic_ops=true (sweep/study.reproducible_xla), under which cuDNN's
attention failed on an H200 (BUILD_NOTES, the third GPU check) and `attention=auto` gives
XLA's slower kernel instead.

  python tools/gpu/determinism_probe.py [--attention cudnn] [--steps 20] [--dtype float32]
      [--json OUT.json]

For each flag set (FLAG_SETS) two fresh processes (no compilation cache: each compiles and
autotunes its own) each train the paper preset's shape at depth 2 (3 models, bf16 unless
--dtype says, width 512, seq 128, batch 128 on a GPU; bench's CPU size on a CPU) for
--steps steps from the same initial state twice in a row, and hash every parameter and
optimizer state. A flag set keeps `run`'s promise (a resumed or rerun study repeats itself
bit for bit) only if all four hashes agree. A program that fails is reported with its
error. On a CPU every flag set is expected to agree (tests/test_gpu_check.py).
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import time

FLAG_SETS = {  # in order of what the answer decides; the JSON is rewritten after each
    "none": "",
    "deterministic ops (run's)": "--xla_gpu_deterministic_ops=true",
    "exclude nondeterministic ops": "--xla_gpu_exclude_nondeterministic_ops=true",
}


def child(attention: str, steps: int, dtype: str | None = None) -> dict:
  """In this process (XLA_FLAGS already set by the parent): two runs from one initial
  state, each run's hash and seconds."""
  import jax
  import numpy as np
  jax.config.update("jax_default_matmul_precision", "highest")
  jax.config.update("jax_threefry_partitionable", True)
  from depthscale import tasks
  from depthscale.bench import shapes
  from depthscale.bench.programs import engine_program
  from depthscale.core import program
  devs = jax.local_devices()[:1]
  p = dataclasses.replace(shapes.on_platform(shapes.PRESETS["paper"], devs[0].platform),
                          depth=2, engine_k=steps)
  p = dataclasses.replace(p, dtype=dtype or p.dtype)
  task = tasks.make(shapes.TASK, **shapes.TASK_OPTIONS)
  prog = engine_program(task, p, shapes.grid_specs(p, p.models), devs, dtype=p.dtype,
                        options={"attention": attention})
  runs = []
  for _ in range(2):
    state, hp, arch = program.init_inputs(prog.specs, prog.cfg, prog.tcfg, prog.devices)
    t0 = time.perf_counter()
    state, _ = prog.run(state, hp, arch, np.int32(steps))
    leaves = jax.device_get(jax.tree.leaves(state))
    seconds = time.perf_counter() - t0
    digest = hashlib.sha256()
    for leaf in leaves:
      digest.update(np.ascontiguousarray(leaf).tobytes())
    runs.append({"hash": digest.hexdigest()[:16], "s": seconds})
  return {"runs": runs, "device": devs[0].device_kind, "dtype": p.dtype}


def probe(flags: str, attention: str, steps: int, dtype: str | None = None) -> dict:
  """Two processes under `flags`: their four hashes, or the first one's error."""
  env = dict(os.environ, XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} {flags}".strip())
  env.pop("JAX_COMPILATION_CACHE_DIR", None)
  procs = []
  for _ in range(2):
    out = subprocess.run([sys.executable, __file__, "--child", "--attention", attention,
                          "--steps", str(steps)] + (["--dtype", dtype] if dtype else []),
                         env=env, capture_output=True, text=True)
    if out.returncode:
      lines = [s for s in out.stderr.strip().splitlines() if s.strip()]
      return {"flags": flags, "ran": False, "error": "\n".join(lines[-3:])[-600:]}
    procs.append(json.loads(out.stdout.strip().splitlines()[-1]))
  hashes = [r["hash"] for proc in procs for r in proc["runs"]]
  return {"flags": flags, "ran": True, "hashes": hashes,
          "same_in_a_process": all(p["runs"][0]["hash"] == p["runs"][1]["hash"] for p in procs),
          "same_across_processes": len(set(hashes)) == 1,
          "run_s": [r["s"] for proc in procs for r in proc["runs"]],
          "device": procs[0]["device"], "dtype": procs[0].get("dtype")}


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--attention", default="cudnn", help="the model's attention option")
  ap.add_argument("--steps", type=int, default=20)
  ap.add_argument("--dtype", choices=("float32", "bfloat16"),
                  help="the models' compute dtype instead of the preset's (bfloat16)")
  ap.add_argument("--json", help="where to write the result")
  ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
  args = ap.parse_args(argv)
  if args.steps < 1:
    raise SystemExit(f"--steps must be at least 1, got {args.steps}")
  if args.child:
    print(json.dumps(child(args.attention, args.steps, args.dtype)))
    return 0
  result = {"attention": args.attention, "steps": args.steps, "flag_sets": {}}
  for name, flags in FLAG_SETS.items():
    row = result["flag_sets"][name] = probe(flags, args.attention, args.steps, args.dtype)
    verdict = (f"reproducible {row['same_across_processes']} (in a process "
               f"{row['same_in_a_process']}), hashes {row['hashes']}" if row["ran"]
               else f"FAILED: {row['error']}")
    print(f"{name}: {verdict}", flush=True)
    if args.json:  # after each flag set: a probe stopped by its time limit keeps the rest
      with open(args.json, "w") as f:
        json.dump(result, f, indent=2)
  return 0


if __name__ == "__main__":
  sys.exit(main())
