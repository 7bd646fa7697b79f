#!/usr/bin/env bash
# The engine's GPU checks as one prepared run, for a machine with a GPU (the
# device tool; nothing here runs in CI or the tests). On that machine:
#
#   bash bench/gpu_check.sh    # results under $OUT; at most 10 min by its limits
#
# 1. the engine's tests on CUDA (tests/engine parametrize their model over cpu and cuda):
#    log-probs against a fresh forward, cache on = cache off, lean decode = model forward;
# 2. bench/rollout.py's B workloads (tree (2,2,1), cached vs re-prefill, one run each per
#    round) on a random-weight Qwen2 of realistic width on the GPU;
# 3. bench/fsdp_check.py: the update on one FSDP2 rank (NCCL) against the one-process update on
#    the same micro-batches (parameters equal within fp32 rounding, and the times). Ray is not on
#    that machine, so the rank runs in process; the rollout worker's engine is the one of 1.
# 4. bench/shared_update.py: the prefix-shared update against every path whole on the same
#    rollouts (sampled by the transformers engine on the GPU), a random-weight Qwen2 of the B
#    width, at (2,2,1) and (4,5,1): update seconds by part, peak CUDA memory, weights apart.
#
# The machine has torch, transformers, peft, tokenizers and hypothesis, nothing else; src/ goes
# on PYTHONPATH, nothing is installed. The tests' fixtures also import bm25s
# (pure Python): carry it in a folder put on EXTRA_PYTHONPATH, e.g.
#   pip install --no-deps --target .device-lib bm25s    # here, then on the machine:
#   EXTRA_PYTHONPATH=$PWD/.device-lib bash bench/gpu_check.sh
# Smoke test on a CPU: DEVICE=cpu B_HIDDEN=128 B_LAYERS=2 PROMPTS=2 REPEATS=1 F_HIDDEN=128 F_LAYERS=2 \
#   PYTHON=.venv/bin/python bash bench/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-bench/results/gpu}
py=${PYTHON:-python3}
device=${DEVICE:-cuda}
mkdir -p "$out"
export PYTHONPATH=src${EXTRA_PYTHONPATH:+:$EXTRA_PYTHONPATH} PYTHONUNBUFFERED=1

{
    date -u
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 || true
    $py -c "import torch, transformers, peft, tokenizers, hypothesis; print('torch', \
torch.__version__, 'transformers', transformers.__version__, 'peft', peft.__version__, \
'cuda', torch.cuda.is_available())"
} 2>&1 | tee "$out/env.txt"

# exit status 5 = no test selected (a CPU smoke run has no cuda parameters)
timeout "${TEST_LIMIT:-120}" $py -m pytest tests/engine -k "$device" -p no:cacheprovider -q \
    2>&1 | tee "$out/pytest-$device.log"

for workload in search feedback; do
    timeout "${BENCH_LIMIT:-120}" $py bench/rollout.py --only "$workload" --device "$device" \
        --b-hidden "${B_HIDDEN:-2048}" --b-layers "${B_LAYERS:-24}" --prompts "${PROMPTS:-16}" \
        --repeats "${REPEATS:-2}" --out "$out/rollout-$workload-$device.json" 2>&1 \
        | tail -4 | tee "$out/rollout-$workload-$device.log"
done

timeout "${FSDP_LIMIT:-120}" $py bench/fsdp_check.py --device "$device" \
    --hidden "${F_HIDDEN:-1024}" --layers "${F_LAYERS:-8}" --out "$out/fsdp-$device.json" 2>&1 \
    | tail -3 | tee "$out/fsdp-$device.log"

timeout "${SHARED_LIMIT:-120}" $py bench/shared_update.py --model random --device "$device" \
    --hidden "${B_HIDDEN:-2048}" --layers "${B_LAYERS:-24}" --shapes 2,2,1 4,5,1 --repeats 1 \
    --prompts "${PROMPTS:-16}" --out "$out/shared-update-$device.json" 2>&1 \
    | tail -8 | tee "$out/shared-update-$device.log"
