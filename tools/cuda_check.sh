#!/usr/bin/env bash
# cuda_check.sh: `make cuda-check`: compile core/cuda/*.cu and link them with NCCL and cudart into build/cuda/cuda_selftest,
# and the NCCL communicator backend (core/comm/nccl/*.c, with gcc, CUDA's and NCCL's headers and MPI's flags) into
# build/cuda/nccl_check. Needs nvcc and NCCL, no GPU: it builds only. Without nvcc it says the check is skipped and exits 0.
#   tools/cuda_check.sh          build
#   tools/cuda_check.sh --run    build, then run build/cuda/cuda_selftest and build/cuda/nccl_check on 1 rank
#                                (on a machine without a GPU they say so, exit 0); more ranks, one per GPU:
#                                build/mixpar run -n 2 -- build/cuda/nccl_check
# Environment: NVCC (compiler), NCCL_HOME (where include/nccl.h and lib/ or lib64/libnccl.so are),
#              CUDA_ARCHS (nvcc -gencode flags; default: sm_75 + sm_80 + sm_90 code and compute_75 PTX).
set -euo pipefail
cd "$(dirname "$0")/.." || exit 2

run=0
case "${1:-}" in
  "") ;;
  --run) run=1 ;;
  *) echo "usage: tools/cuda_check.sh [--run]" >&2; exit 2 ;;
esac

shopt -s nullglob
sources=(core/cuda/*.cu)
nccl_sources=(core/comm/nccl/*.c)
shopt -u nullglob  # the -gencode flags below hold brackets, which nullglob would eat
if [ ${#sources[@]} -eq 0 ] && [ ${#nccl_sources[@]} -eq 0 ]; then
  # The student edition leaves the CUDA self-test out: its device encoders are lab 03's answer.
  echo "cuda-check: skipped: no CUDA sources in core/cuda or core/comm/nccl"
  exit 0
fi

nvcc=${NVCC:-}
if [ -z "$nvcc" ]; then
  if command -v nvcc >/dev/null 2>&1; then nvcc=$(command -v nvcc)
  elif [ -x /usr/local/cuda/bin/nvcc ]; then nvcc=/usr/local/cuda/bin/nvcc
  fi
fi
if [ -z "$nvcc" ]; then
  echo "cuda-check: skipped: nvcc is not on PATH or in /usr/local/cuda/bin (install the CUDA Toolkit to build the GPU code)"
  exit 0
fi
cuda_home=$(dirname "$(dirname "$(readlink -f "$nvcc")")")

# NCCL: headers and library, from NCCL_HOME, the toolkit, any /usr/local/cuda-*, or the system.
first_existing() { for p in "$@"; do [ -e "$p" ] && { echo "$p"; return 0; }; done; return 1; }
nccl_h=$(first_existing ${NCCL_HOME:+"$NCCL_HOME/include/nccl.h"} "$cuda_home/include/nccl.h" \
         /usr/local/cuda/include/nccl.h /usr/local/cuda-*/include/nccl.h /usr/include/nccl.h) || {
  echo "cuda-check: nccl.h not found (looked in \$NCCL_HOME/include, $cuda_home/include, /usr/local/cuda*/include, /usr/include)" >&2
  echo "  hint: install NCCL or set NCCL_HOME" >&2
  exit 1
}
nccl_so=$(first_existing ${NCCL_HOME:+"$NCCL_HOME/lib/libnccl.so" "$NCCL_HOME/lib64/libnccl.so"} \
          "$cuda_home/lib64/libnccl.so" /usr/local/cuda/lib64/libnccl.so /usr/local/cuda-*/lib64/libnccl.so \
          /usr/lib/x86_64-linux-gnu/libnccl.so /usr/lib64/libnccl.so) || {
  echo "cuda-check: libnccl.so not found (looked in \$NCCL_HOME/lib*, $cuda_home/lib64, /usr/local/cuda*/lib64, /usr/lib*)" >&2
  echo "  hint: install NCCL or set NCCL_HOME" >&2
  exit 1
}
nccl_inc=$(dirname "$nccl_h")
nccl_lib=$(dirname "$nccl_so")

archs=${CUDA_ARCHS:-"-gencode arch=compute_75,code=[sm_75,compute_75] -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90"}

# The CPU reference the self-test compares against lives in libmixpar.
make -s build/libmixpar.a
mkdir -p build/cuda
echo "cuda-check: $("$nvcc" --version | tail -n 1)"
echo "cuda-check: NCCL from $nccl_inc and $nccl_lib"
if [ ${#sources[@]} -gt 0 ] && ! grep -q '^int main' "${sources[@]}"; then
  # The student edition has no self-test (no main to link): each source is compiled alone.
  for src in "${sources[@]}"; do
    # shellcheck disable=SC2086  # archs is a list of flags
    "$nvcc" -std=c++17 -O2 -Icore -I"$nccl_inc" $archs -Xcompiler -Wall,-Wextra -c "$src" \
      -o "build/cuda/$(basename "${src%.cu}").o"
  done
  echo "cuda-check: compiled ${sources[*]} (no self-test in this edition)"
elif [ ${#sources[@]} -gt 0 ]; then
  # shellcheck disable=SC2086  # archs is a list of flags
  "$nvcc" -std=c++17 -O2 -Icore -I"$nccl_inc" $archs -Xcompiler -Wall,-Wextra \
    "${sources[@]}" build/libmixpar.a -L"$nccl_lib" -lnccl -Xlinker -rpath="$nccl_lib" -lcjson -lpthread -lm \
    -o build/cuda/cuda_selftest
  echo "cuda-check: built build/cuda/cuda_selftest (core/cuda/*.cu + libmixpar + NCCL + cudart)"
fi

# The NCCL communicator backend is plain C on CUDA's runtime API: gcc with CUDA's and NCCL's headers and MPI's
# flags, warnings as errors, linked with libmixpar (whose weak comm_backend_nccl it fills in).
if [ ${#nccl_sources[@]} -gt 0 ]; then
  cc=${CC:-gcc}
  # shellcheck disable=SC2046  # mpicc prints lists of flags
  "$cc" -std=gnu11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -Icore -I"$cuda_home/include" -I"$nccl_inc" \
    $(mpicc --showme:compile) "${nccl_sources[@]}" build/libmixpar.a -L"$cuda_home/lib64" -L"$nccl_lib" \
    -Wl,-rpath,"$nccl_lib" -Wl,-rpath,"$cuda_home/lib64" -lnccl -lcudart $(mpicc --showme:link) \
    -lopenblas -lcjson -lm -fopenmp -pthread -o build/cuda/nccl_check
  echo "cuda-check: built build/cuda/nccl_check (core/comm/nccl/*.c + libmixpar + NCCL + cudart + MPI)"
fi

if [ "$run" = 1 ]; then
  [ ! -x build/cuda/cuda_selftest ] || build/cuda/cuda_selftest
  [ ! -x build/cuda/nccl_check ] || build/cuda/nccl_check
fi
