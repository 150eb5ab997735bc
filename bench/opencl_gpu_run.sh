#!/bin/bash
# The whole GPU measurement of issue 33 as one command, for a GPU machine without network
# (the device tool's H200: python3 3.12 with torch, numpy, onnxruntime; no pyopencl, xDSL
# or lark; NVIDIA's OpenCL library present but possibly not registered for the loader).
#
#   bash bench/opencl_gpu_run.sh fetch      # here, with network: the wheels into .whl/
#   bash bench/opencl_gpu_run.sh            # there, from the checkout: everything below
#
# There it installs the wheels of .whl/ into /tmp/site (--no-deps: torch's numpy stays),
# makes this checkout importable as `dlpc` (a symlink, so the run measures the working
# tree, not a wheel of it), and writes into $OUT (default /tmp/opencl-gpu):
#   table.txt      bench/opencl_gpu.py: every example at batch 1 and 32, dlpc OpenCL
#                  (whole calls from numpy, and calls on device tensors) against torch
#                  eager on CUDA, with errors against the reference
#   tiles0.txt     transformer, mobilenet, resnet and lenet at batch 1 and 32 with
#                  DLPC_OPENCL_TILES=0 (no __local tiles: does the rule's tiling pay?)
#   tilesall.txt   mlp, lenet and resnet at batch 1 and 32 with DLPC_OPENCL_TILES=all
#                  (every product tiled: would a lower threshold pay?)
#   tune.txt       dlpc-tune --target opencl on mlp and resnet (batch 32),
#                  then --compare: default against tuned plans, per kernel
#   kernels.tgz    per row: each kernel's device time and launch, and the program
#                  (bench/opencl_gpu.py --kernels), and the two tuning logs
# The H200 took about 2 min for the table alone (5 models x 2 batches, 30 calls each)
# before the device-tensor column, which compiles each row a second time: TABLE_S 300. The
# files are written as they are made, so a call cut off by the device tool's 600 s limit
# still returns the table.
set -u
cd "$(dirname "$0")/.." || exit 1
WHEELS=(pyopencl==2026.1.4 xdsl==0.74.0 lark==1.3.1 pytools==2026.1.1 platformdirs==4.14.8
        immutabledict==4.3.1 ordered-set==4.1.0 siphash24==1.9)
if [ "${1:-run}" = fetch ]; then
  grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo /.whl/ >> .git/info/exclude
  exec python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl "${WHEELS[@]}"
fi
if [ -z "${SKIP_PIP:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
fi
mkdir -p /tmp/pk && ln -sfn "$PWD" /tmp/pk/dlpc
export PYTHONPATH=/tmp/pk:/tmp/site${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/opencl-gpu}
mkdir -p "$OUT"
K=$(mktemp -d)
T0=$(date +%s)
stamp() { echo "== $1 at $(( $(date +%s) - T0 )) s"; }
bench() { timeout "$1" python3 bench/opencl_gpu.py "${@:2}"; }
tune() { timeout "$1" python3 -m dlpc.tools.dlpc_tune "${@:2}"; }
stamp table
bench "${TABLE_S:-300}" --kernels "$K/table" ${TABLE_ARGS:-} 2>&1 | tee "$OUT/table.txt"
if [ -z "${TABLE_ONLY:-}" ]; then
  stamp tiles
  DLPC_OPENCL_TILES=0 bench 90 --device none --batches 1,32 \
    --models transformer,mobilenet,resnet,lenet --kernels "$K/tiles0" > "$OUT/tiles0.txt" 2>&1
  DLPC_OPENCL_TILES=all bench 90 --device none --batches 1,32 --models mlp,lenet,resnet \
    --kernels "$K/tilesall" > "$OUT/tilesall.txt" 2>&1
  stamp tune
  for spec in mlp:32:12 resnet:32:8; do
    IFS=: read -r m b n <<< "$spec"
    log="$K/$m-b$b.jsonl"
    tune 90 "examples/$m.dlpc" --target opencl --batch "$b" --trials "$n" --strategy grid \
      --verify 1 --quiet --log "$log" >> "$OUT/tune.txt" 2>&1
    tune 30 "examples/$m.dlpc" --target opencl --batch "$b" --log "$log" --compare \
      >> "$OUT/tune.txt" 2>&1
  done
fi
stamp done
tail -40 "$OUT/tune.txt" 2>/dev/null
tar czf "$OUT/kernels.tgz" -C "$K" .
