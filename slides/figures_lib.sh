# figures_lib.sh: sourced by slides/NN-slug.figures.sh: checks the one argument (the output folder), makes
# it, sets $outdir to its absolute path, moves to the repository root, and checks build/mixpar and gnuplot.
# After it: $outdir, $mixpar (build/mixpar), and `set -euo pipefail` in force.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
mkdir -p "$1"
outdir=$(cd "$1" && pwd)
cd "$(dirname "$0")/.."
mixpar=build/mixpar
[ -x "$mixpar" ] || { echo "$0: $mixpar is missing; run 'make' first" >&2; exit 2; }
command -v gnuplot > /dev/null || { echo "$0: gnuplot is not installed (make deps)" >&2; exit 2; }
