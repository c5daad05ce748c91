"""Why is the RMSNorm reference slower inside the autograded notebook than in `make bench`?

Times it fresh, then after each of the notebook's checks, in one process.
"""
import torch

import grader
from grader.student import checks
from grader.pipeline import notebooks

path = "solutions/day2/rmsnorm.ipynb"
ns = notebooks.run_code_cells(path)
fn = ns["rmsnorm"]


def t(label):
    r = checks.measure_speed("day2.rmsnorm_forward", fn)
    print(f"{label:>40}: yours {r.yours_ms:.4f} ms, baseline {r.baseline_ms:.4f} ms, {r.ratio:.2f}x")


t("fresh")
t("fresh, again")
grader.check("day2.rmsnorm_forward", fn, hidden=True)
t("after forward checks")
grader.check("day2.rmsnorm_backward", fn, hidden=True)
t("after backward checks")
import gc
gc.collect()
torch.cuda.empty_cache()
t("after gc + empty_cache")
