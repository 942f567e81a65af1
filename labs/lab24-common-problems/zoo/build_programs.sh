#!/usr/bin/env bash
# build_programs.sh: builds the zoo's programs (zoo_bugs.c) against build/libmixpar.a when they are missing or older:
# build/labs/lab24_zoo_bugs, and build/labs/lab24_zoo_bugs_asan with AddressSanitizer (for the out-of-bounds entry).
set -euo pipefail
cd "$(dirname "$0")/../../.."
src=labs/lab24-common-problems/zoo/zoo_bugs.c
mkdir -p build/labs
flags=(-std=gnu11 -D_GNU_SOURCE -g -Wall -Wextra -fopenmp -Icore $(mpicc --showme:compile 2>/dev/null))
libs=(build/libmixpar.a -lopenblas -lcjson -lm -pthread -fopenmp $(mpicc --showme:link 2>/dev/null))
for variant in plain asan; do
    out=build/labs/lab24_zoo_bugs; extra=(-O2)
    [ "$variant" = asan ] && { out=${out}_asan; extra=(-O1 -fsanitize=address -fno-omit-frame-pointer); }
    if [ ! -x "$out" ] || [ "$src" -nt "$out" ] || [ build/libmixpar.a -nt "$out" ]; then
        cc "${flags[@]}" "${extra[@]}" -o "$out" "$src" "${libs[@]}"
    fi
done
