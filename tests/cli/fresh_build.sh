#!/usr/bin/env bash
# fresh_build.sh: the README's first command on a machine where `make deps` has still to install OpenMPI:
# one make invocation must install the packages, then compute MPI's flags and build with them.
# A scratch copy of the tree runs with a PATH that has every program but mpicc; its tools/deps.sh is
# replaced by one that "installs" mpicc into that PATH, as apt-get would, mid-invocation.
source "$(dirname "$0")/../lib.sh"

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
real_mpicc=$(command -v mpicc) || { echo "not ok - fresh build (mpicc is not installed here)"; exit 0; }

# The tree as committed plus what is not ignored (the test sees the working tree, not an old commit).
(cd "$ROOT" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) | (mkdir "$scratch/tree" && tar -xf - -C "$scratch/tree")

# A PATH of links to every program on this PATH except mpicc.
mkdir "$scratch/bin"
IFS=: read -ra path_dirs <<<"$PATH"
for dir in "${path_dirs[@]}"; do
  # ln keeps a name that is already linked (an earlier PATH entry wins, as in PATH lookup) and goes on.
  [ -d "$dir" ] && ln -s "$dir"/* "$scratch/bin/" 2>/dev/null
done
rm -f "$scratch/bin/mpicc"
cat >"$scratch/tree/tools/deps.sh" <<EOF
#!/usr/bin/env bash
# the test's stand-in for deps.sh: mpicc appears on PATH only now, as after apt-get install libopenmpi-dev
ln -s "$real_mpicc" "$scratch/bin/mpicc"
EOF
chmod +x "$scratch/tree/tools/deps.sh"
fresh_make() { PATH="$scratch/bin" make --no-print-directory -C "$scratch/tree" "$@"; }

check_output "make help on a fresh tree installs nothing" 0 "make demo" fresh_make help
check "make help left mpicc uninstalled" test ! -e "$scratch/bin/mpicc"
# backend_mpi.c includes mpi.h: it compiles only with the flags that mpicc gives once it is installed.
check_output "one make on a fresh machine installs deps, then builds MPI code with MPI's flags" 0 \
  "backend_mpi\.c" fresh_make build/obj/core/comm/backend_mpi.o
check_output "build/config.mk holds MPI's include flags" 0 "^MPI_CFLAGS := .*-I" cat "$scratch/tree/build/config.mk"

# Without mpicc after deps, the build stops at once with a message, not later with "mpi.h: No such file".
rm -f "$scratch/bin/mpicc" "$scratch/tree/build/config.mk"
printf '#!/usr/bin/env bash\ntrue\n' >"$scratch/tree/tools/deps.sh"
check_output "no mpicc after deps: a clear message, not a compiler error" 2 "mpicc .*not found.*install libopenmpi-dev" \
  fresh_make build/obj/core/comm/backend_mpi.o
