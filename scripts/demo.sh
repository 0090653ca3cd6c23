#!/usr/bin/env bash
# The main job on the embedded default: TurnOPD distillation of the tiny household student.
#   1. build the tiny zoo (seconds, cached);
#   2. train the household teacher by imitation of the env gateway's expert, once (about an hour
#      on 2 CPU cores; cached under ~/.cache/turnopd/models/teacher-sft);
#   3. warm-start the student briefly on expert episodes, once (a few minutes; student-sft);
#   4. `turnopd train --config configs/demo.toml`: TurnOPD from student-sft with teacher-sft,
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
    echo "== turnopd teacher train --config configs/teacher_alfworld.toml (once; about an hour)"
    turnopd teacher train --config configs/teacher_alfworld.toml
fi
if ! turnopd models path student-sft >/dev/null 2>&1; then
    echo "== turnopd teacher train --config configs/student_alfworld.toml (once; a few minutes)"
    turnopd teacher train --config configs/student_alfworld.toml
fi
echo "== turnopd train --config configs/demo.toml $*"
turnopd train --config configs/demo.toml "$@"
