"""A starting student that is the teacher with its weights perturbed (the fourth sitting of
docs/results/2026-11-27-starting-students.md): every matrix W of `teacher-novel` becomes
W + scale * std(W) * N(0, 1) (seed 0), saved in bf16. Since the fifth sitting this is
`turnopd models perturb` (services/models/perturb.py), which gives the same bytes:

    python docs/results/2026-11-27-starting-students/perturb_teacher.py 0.25 models/noise0.25
    turnopd models perturb teacher-novel --out models/noise0.25 --scale 0.25 --seed 0 --replace
"""

import sys

from services.models.perturb import perturb_model

if __name__ == "__main__":
    perturb_model("teacher-novel", sys.argv[2], float(sys.argv[1]), seed=0, replace=True)
