#!/usr/bin/env bash
# The main job on the embedded default: TurnOPD distillation of the tiny household student.
#   1. build the tiny zoo (seconds, cached);
#   2. train the household teacher by imitation of the env gateway's expert, once: stage 1 (about
#      an hour on 2 CPU cores; teacher-sft), then stage 2 (18 min; teacher-recovery), cached under
#      ~/.cache/turnopd/models/;
#   3. cut the student from the teacher (three of its four layers) and heal it briefly, once
#      (about a minute; student-cut3);
#   4. `turnopd train --config configs/demo.toml`: TurnOPD from student-cut3 with teacher-recovery,
#      with an evaluation before step 1 and every 8 steps (runs/demo).
# Extra arguments go to `turnopd train` (e.g. --run-dir DIR, --steps K, --method vanilla).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

bash scripts/setup.sh
turnopd() { "$PY" -m services.cli "$@"; }

echo "== turnopd models build"
turnopd models build
if ! turnopd models path teacher-sft >/dev/null 2>&1; then
    echo "== turnopd teacher train --config configs/teacher_alfworld.toml --epochs 4 (once; about an hour)"
    turnopd teacher train --config configs/teacher_alfworld.toml --epochs 4
fi
if ! turnopd models path teacher-recovery >/dev/null 2>&1; then
    echo "== turnopd teacher train --config configs/teacher_alfworld_recovery.toml (once; about 18 min)"
    turnopd teacher train --config configs/teacher_alfworld_recovery.toml
fi
if ! turnopd models path student-cut3 >/dev/null 2>&1; then
    echo "== turnopd teacher train --config configs/student_alfworld_cut3.toml (once; about a minute)"
    turnopd teacher train --config configs/student_alfworld_cut3.toml
fi
echo "== turnopd train --config configs/demo.toml $*"
turnopd train --config configs/demo.toml "$@"
