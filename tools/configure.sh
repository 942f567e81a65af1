#!/usr/bin/env bash
# configure.sh: print build/config.mk, the build flags that come from installed packages (OpenMPI's compiler
# wrapper). The Makefile makes that file after `make deps`, then rereads itself, so the very first `make`
# on a machine without the packages installs them and builds in one invocation.
set -euo pipefail
if ! command -v mpicc >/dev/null; then
  echo "configure: mpicc (OpenMPI's compiler wrapper) not found on PATH after 'make deps';" \
       "install libopenmpi-dev and openmpi-bin, then run make again" >&2
  exit 2
fi
compile=$(mpicc --showme:compile) || { echo "configure: 'mpicc --showme:compile' failed" >&2; exit 2; }
link=$(mpicc --showme:link) || { echo "configure: 'mpicc --showme:link' failed" >&2; exit 2; }
echo "# build/config.mk: made by tools/configure.sh after make deps; delete it to recompute"
echo "MPI_CFLAGS := $compile"
echo "MPI_LIBS := $link"
