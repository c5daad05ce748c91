"""Does the RMSNorm reference's time depend on where its tensors land in memory?"""
import torch

from grader.student import checks
from grader.pipeline import notebooks

ns = notebooks.run_code_cells("solutions/day2/rmsnorm.ipynb")
fn = ns["rmsnorm"]
keep = []
for trial in range(8):
    if trial % 4 == 0:
        torch.cuda.empty_cache()
    keep.append(torch.empty(int(torch.randint(1, 300, ()).item()) * 2**20, dtype=torch.uint8, device="cuda"))
    r = checks.measure_speed("day2.rmsnorm_forward", fn)
    print(f"trial {trial}: yours {r.yours_ms:.4f} ms, baseline {r.baseline_ms:.4f} ms, {r.ratio:.2f}x "
          f"(allocated {torch.cuda.memory_reserved() / 2**30:.1f} GiB reserved)")
