#!/usr/bin/env bash
# Run a command as if on an AVX2-only CPU (no AVX-512, AVX-VNNI, bf16 or AMX), to measure the
# paths such CPUs take on a machine that has more. Linux x86-64 with the cpuid_fault CPU flag.
#   bash bench/avx2_only/run.sh python -m bench.embed_bench ...
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$here/../out/avx2_only"
mkdir -p "$out"
if [ ! -f "$out/cpuid_mask.so" ] || [ "$here/cpuid_mask.c" -nt "$out/cpuid_mask.so" ]; then
    cc -O2 -shared -fPIC -o "$out/cpuid_mask.so" "$here/cpuid_mask.c"
fi
grep -qw cpuid_fault /proc/cpuinfo || { echo "avx2_only: no cpuid_fault flag in /proc/cpuinfo: cannot hide CPU features here" >&2; exit 3; }
BRIDGE_BENCH_CPU="avx2-only (emulated: AVX-512, AVX-VNNI, bf16 and AMX hidden from CPUID)" \
    LD_PRELOAD="$out/cpuid_mask.so${LD_PRELOAD:+:$LD_PRELOAD}" exec "$@"
