#!/usr/bin/env bash
# Measured compute on one NVIDIA GPU (issue 13): profile of the machine, then bench step per model and dtype.
# Run from the repository root on a GPU machine with torch (CUDA build) installed:
#   bash measurements/gpu_compute.sh OUTDIR
# Writes OUTDIR/detected.yaml, OUTDIR/gpu-step-*.csv and OUTDIR/calibrated.yaml. One rank (world size 1, nccl),
# CUDA-event timing after warm-up, medians. About 5-8 minutes on an H100/H200.
# NOT RUN YET: no GPU was available to the session that wrote it (see measurements/README.md).
set -euo pipefail
out=${1:-gpu-out}
mkdir -p "$out"
common=(--world-sizes 1 --backend nccl --mode flat --steps 20 --warmup 5 --timeout 600)
simcli profiles detect -o "$out/detected.yaml" --force
# GPT-2-medium-like: 24 blocks, hidden 1024, 16 heads, seq 2048, GPT-2 vocabulary (tied head)
simcli bench step "${common[@]}" --model gpt --layers 24 --hidden 1024 --heads 16 --seq-len 2048 --vocab 50257 \
  --batch-per-device 8 --dtype bf16 -o "$out/gpu-step-gpt-medium-bf16.csv" --force
# 1B-like: 24 blocks, hidden 2048, 16 heads, seq 2048
simcli bench step "${common[@]}" --model gpt --layers 24 --hidden 2048 --heads 16 --seq-len 2048 --vocab 50257 \
  --batch-per-device 4 --dtype bf16 -o "$out/gpu-step-gpt-1b-bf16.csv" --force
# the CNN: ResNet-50's shape at 224 px, in each dtype
for dt in bf16 fp16 tf32 fp32; do
  simcli bench step "${common[@]}" --model resnet --model-width 64 --blocks 3,4,6,3 --image-size 224 --classes 1000 \
    --batch-per-device 128 --dtype "$dt" -o "$out/gpu-step-resnet50-$dt.csv" --force
done
# one step file per calibration: the dtypes of the CNN together (every run's comment lines kept)
rm -f "$out/gpu-step-resnet50-all.csv"
python measurements/concat_steps.py "$out/gpu-step-resnet50-all.csv" "$out"/gpu-step-resnet50-{bf16,fp16,tf32,fp32}.csv
simcli calibrate "$out/gpu-step-resnet50-all.csv" --profile "$out/detected.yaml" -o "$out/calibrated.yaml" --force
simcli validate "$out/gpu-step-gpt-medium-bf16.csv" --profile "$out/calibrated.yaml"
