#!/usr/bin/env bash
# mpi_comm.sh: runs the communicator's multi-rank suite (tests/mpi/run.sh) as part of `make test`.
exec "$(dirname "$0")/../mpi/run.sh"
