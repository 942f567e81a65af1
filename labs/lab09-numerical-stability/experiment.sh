#!/usr/bin/env bash
# experiment.sh: `make lab09` (so far: the hysteresis exercise): the same pattern of overflows replayed
# through DeepSpeed's loss scaler with hysteresis 1, 2 and consecutive hysteresis, and PyTorch's scaler
# beside them, using the real scaler code (your LAB 09 region for the DeepSpeed kind).
cd "$(dirname "$0")/../.." || exit 2
mixpar=build/mixpar
pattern="C*3 O C*3 O O C*4 O C O C*3 O O O"
echo "pattern: $pattern   (C a clean step, O an overflow: a gradient with inf)"
common=(--init-scale-power 4 --window 4 --min-scale 1)
for label in "deepspeed, hysteresis 1:--kind deepspeed --hysteresis 1" \
             "deepspeed, hysteresis 2:--kind deepspeed --hysteresis 2" \
             "deepspeed, hysteresis 2, consecutive:--kind deepspeed --hysteresis 2 --consecutive-hysteresis"; do
  name=${label%%:*}
  read -r -a opts <<<"${label#*:}"
  echo
  echo "== $name (initial scale 2^4, window 4, min scale 1)"
  "$mixpar" amp scaler-trace "${opts[@]}" "${common[@]}" --all $pattern 2>&1
  rc=$?
  if [ $rc -eq 2 ]; then echo "(the scaler stopped the run here: overflow at the minimum scale, as a training run would)"
  elif [ $rc -ne 0 ]; then exit $rc; fi
done
echo
echo "== pytorch (init 16, growth interval 4, x2 / x0.5): skips every overflow, no hysteresis"
"$mixpar" amp scaler-trace --kind pytorch --init-scale 16 --growth-interval 4 --all $pattern || exit
echo
echo "Read the columns: which overflows shrink the scale at once, which only use up hysteresis, and when"
echo "the scale grows again. The handout's questions are about this table."
