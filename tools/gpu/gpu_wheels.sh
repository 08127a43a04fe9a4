#!/usr/bin/env bash
# The wheels a GPU machine's image lacks (it has jax for CUDA, flax, optax, orbax, chex and
# torch, and no network), at requirements.lock's versions, into .whl/ (git-ignored) for
# tools/gpu/gpu_session.sh to install there. Run here, where pip reaches the index:
#   tools/gpu/gpu_wheels.sh [PYTHON_VERSION] # default 3.12, the image's
set -eu
cd "$(dirname "$0")/../.."
pins=()
for name in ml-collections submitit; do
  pin=$(grep -i "^$name==" requirements.lock) || { echo "gpu_wheels: $name not in requirements.lock"; exit 1; }
  pins+=("$pin")
done
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version "${1:-3.12}" \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d .whl "${pins[@]}"
ls .whl
