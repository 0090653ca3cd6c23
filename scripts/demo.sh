#!/usr/bin/env bash
# The main job: TurnOPD distillation of the tiny household student from the shipped teacher.
#   1. set up (scripts/setup.sh: under two minutes with uv);
#   2. the models: the student `student-novel-noisy` and the teacher `teacher-novel` come from
#      artifacts/models/ where they are shipped (checksums verified on first use; `turnopd models
#      list` shows their recipes), else from the cache; a model that is neither is trained here
#      by its recipe, once (configs/teachers/: teacher-novel from the shipped teacher-remind takes
#      about 50 min on 2 cores, from scratch about two and a half hours; the student, teacher-novel
#      perturbed by seeded noise, seconds);
#   3. `turnopd train --config configs/demo.toml`: the student learns from the teacher. It evaluates
#      the student greedily on 60 valid_unseen games after steps 4, 8 and 12 and ends with a table: the
#      student before (its shipped manifest, measured on the same games) and after, the teacher on
#      the same games, wall time, H_hat and success over the run (success.png in the run directory).
# Extra arguments go to `turnopd train` (e.g. --run-dir DIR, --steps K, --method vanilla, or
# --resume runs/demo-... to continue a stopped run); each run gets its own runs/demo-<time>/.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
started=$(date +%s)

bash scripts/setup.sh
echo "== setup took $(($(date +%s) - started)) s"
turnopd() { "$PY" -m services.cli "$@"; }

have() { turnopd models path "$1" >/dev/null 2>&1; }
recipe() {
  echo "== turnopd teacher train --config configs/teachers/$1 (once: $2 is neither shipped nor cached)"
  turnopd teacher train --config "configs/teachers/$1"
}
if ! have teacher-novel || ! have student-novel-noisy; then
  turnopd models build
  have teacher-remind || recipe teacher_alfworld_reminder.toml teacher-remind
  have teacher-novel || recipe teacher_alfworld_novel.toml teacher-novel
  if ! have student-novel-noisy; then
    echo "== turnopd models perturb teacher-novel --out student-novel-noisy (once: neither shipped nor cached)"
    turnopd models perturb teacher-novel --out student-novel-noisy --scale 0.25 --seed 0
  fi
fi
# A new run directory each time, unless the arguments name one (--run-dir, --resume).
args=("$@")
case " $* " in
  *" --run-dir"*|*" --resume"*) ;;
  *) args+=(--run-dir "runs/demo-$(date +%Y%m%d-%H%M%S)") ;;
esac
if [[ " $* " == *" --resume"* ]]; then
  echo "== turnopd train ${args[*]}"
  turnopd train "${args[@]}"
else
  echo "== turnopd train --config configs/demo.toml ${args[*]}"
  turnopd train --config configs/demo.toml "${args[@]}"
fi
echo "== demo.sh took $(($(date +%s) - started)) s in all (setup included)"
