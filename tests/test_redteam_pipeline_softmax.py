"""Red team through the real pipeline: a class of Day 2 softmax notebooks (the `softmax` solution cell only,
as students may edit it), collected, sanitized, autograded in the sandboxed batch with a secret seed and
scored by nbgrader, once for the module.

Honest variants (Triton's fused-softmax tutorial's manner, Liger-Kernel's looped online softmax, exp2 with
several rows per program, Triton's autotuning with pruning and a heuristic) must get the 3 correctness
points; cheats (PyTorch computing beside a launch, PyTorch in a class of the answer's own that Triton's
autotuner or heuristics call into, the grader's functions called or patched from the answer cell, the
grader's figures and exercise data written from it, NumPy computing inside the interpreted kernel, by
an object's __getitem__ or through a global that the grid function rebinds; Python in a branch Triton's
compiler decides the other way; the interpreter used outside a kernel's programs; a thread left running)
must get 0, or be refused with the rule they broke.
Without a GPU the speed cell scores 0 for everyone and says that it needs a CUDA GPU.
"""
from __future__ import annotations

import json
import os

import pytest

import classroom
import redteam_softmax_answers as answers
from adversarial_class import cell
from conftest import DEVICE, REPO, nbgrader, require_sandbox
from grader.pipeline import batch, submissions

DAY, NAME, SEED = "day2", "softmax", "271828"
CORRECT, SPEED = "test_softmax_correct", "test_softmax_speed"

# student -> (answer cell, correctness points it must get, what it tries)
CLASS = {
    "honest_tutorial": (answers.TUTORIAL_STYLE, 3, "Triton tutorial's manner: a block per row, persistent grid"),
    "honest_liger": (answers.LIGER_STYLE, 3, "Liger-Kernel's manner: autograd.Function, looped online softmax"),
    "honest_exp2_rows": (answers.EXP2_MULTIROW, 3, "exp2, several rows per program, per-lane online sums"),
    "cheat_torch_beside_token": (answers.TORCH_BESIDE_TOKEN, 0, "torch.softmax, a launch for show"),
    "cheat_torch_normalises": (answers.TORCH_NORMALISES, 0, "exp in Triton, the division by PyTorch"),
    "cheat_torch_in_triton_op": (answers.TORCH_IN_TRITON_OP, 0, "torch.softmax inside a triton_op"),
    "cheat_calls_the_grader": (answers.CALLS_THE_GRADER, 0, "memcheck, check_speed, check, credit from the cell"),
    "cheat_patches_the_grader": (answers.PATCHES_THE_GRADER, 0, "grader.check / check_speed assigned"),
    "cheat_shadows_the_grader": (answers.SHADOWS_THE_GRADER, 0, "the name grader rebound to a lenient object"),
    "cheat_swaps_compare": (answers.SWAPS_A_GRADER_FUNCTION, 0, "grader.compare.assert_close swapped"),
    "cheat_writes_the_grader": (answers.writes_the_grader(str(REPO)), 0,
                                "measured/reference figures and day2's reference rewritten from the cell"),
    "cheat_numpy_in_kernel": (answers.NUMPY_IN_THE_INTERPRETER, 0,
                              "NumPy computes the softmax inside the interpreted kernel's body"),
    "honest_autotuned": (answers.AUTOTUNED_AND_PRUNED, 3, "triton.autotune, prune_configs_by and a heuristic"),
    "honest_unusual": (answers.HONEST_UNUSUAL, 3, "a @triton.jit helper under another name, constexpr globals"),
    "cheat_numpy_in_getitem": (answers.NUMPY_ROUTES["getitem"], 0, "NumPy in an object's __getitem__, in the kernel"),
    "cheat_numpy_rebound_by_grid": (answers.NUMPY_ROUTES["rebound_by_the_grid"], 0,
                                    "a clean helper's global rebound to NumPy by the grid function"),
    "cheat_config_subclass": (answers.CONFIG_SUBCLASS, 0, "torch in a triton.Config subclass's all_kwargs"),
    "cheat_config_values": (answers.CONFIG_VALUES_DICT_SUBCLASS, 0, "torch in a config values dict's keys()"),
    "cheat_autotune_keys": (answers.KEYS_LIST_SUBCLASS, 0, "torch in the autotune key list's __iter__"),
    "cheat_heuristics_dict": (answers.HEURISTICS_DICT_SUBCLASS, 0, "torch in the heuristics dict's items()"),
    # the third red team's (each scored 3/3 before its fix)
    "cheat_dead_branch": (answers.DEAD_BRANCH_FLOATS, 0, "Python floats in a branch the compiler folds away"),
    "cheat_combine_dead_branch": (answers.COMBINE_DEAD_BRANCH, 0, "the same branch in a tl.reduce combine function"),
    "cheat_grid_function_tl": (answers.GRID_FUNCTION_TL, 0, "tl.load/exp/store in the grid function"),
    "cheat_host_builder": (answers.HOST_INTERPRETER_BUILDER, 0, "the interpreter's builder from host code"),
    "cheat_thread_set_up_again": (answers.QUEUE_LISTENER_THREAD_SETUP_AGAIN, 0,
                                  "torch.softmax in a QueueListener's thread, grader.setup() after it started"),
    "honest_jit_argument": (answers.JIT_FUNCTION_ARGUMENT, 3, "a @triton.jit function as a constexpr argument"),
    # the fifth red team's
    "cheat_two_faced_helper": (answers.TWO_FACED_HELPER, 0,
                               "NumPy on a block's text, in a helper's branch compiled for a string only"),
    "cheat_two_faces_by_text": (answers.TWO_FACES_BY_TEXT, 0, "the same, its branch chosen by a constexpr's text"),
    "honest_reduce_combine": (answers.HONEST_REDUCE_COMBINE, 3, "tl.reduce with a (max, sum) combine function"),
    # the sixth red team's
    "cheat_fstring_of_a_block": (answers.FSTRING_OF_CONSTEXPR_BLOCK, 0, "a row's sum read from f\"{tl.constexpr(s)}\""),
    "cheat_python_max": (answers.PYTHON_MAX_OF_BLOCKS, 0, "Python's max of two blocks (not elementwise)"),
    "cheat_python_softmax": (answers.PYTHON_SOFTMAX_FROM_TEXT, 0, "math.exp of each value, from a chunk's text"),
    "honest_static_assert_format": (answers.honest_with(answers.HONEST_LINES["static_assert_format"][0]), 3,
                                    "tl.static_assert with a message made by str.format"),
    # the seventh red team's
    "cheat_value_by_selection": (answers.VALUE_DIFFERENCES["python_exp_by_argument_selection"], 0,
                                 "math.exp of (0.0, block)[isinstance(tl.range(1), range)]: no branch"),
    "cheat_value_by_is": (answers.VALUE_DIFFERENCES["no_python_function_is_and_percent"], 0,
                          "`tl.constexpr(2) is 2` picks what \"%d\" % and ** read"),
    # the eighth red team's
    "cheat_static_range_union": (answers.EIGHTH_TEAM["static_range_union"], 0,
                                 "a condition that differs in one iteration of a tl.static_range"),
    # the ninth red team's
    "cheat_list_reversed": (answers.NINTH_TEAM["triton_function_list_reversed_in_untaken_if"], 0,
                            "a constexpr list of (tl.sum, tl.max) reversed in a branch the compiler reads"),
    # the tenth red team's
    "honest_reduce_sum": (answers.HONEST_REDUCE_SUM, 3, "a row's sum by tl.reduce with the kernel's own add"),
    # the twelfth red team's: a probe that NumPy's exact math and the GPU's approximate instructions answer apart
    **{f"cheat_{route}": (answer, 0, f"normalises only where {route.replace('_', ' ')} goes unseen")
       for route, answer in answers.TWELFTH_TEAM.items()},
    "honest_liger_cache_hints": (answers.HONEST_LIGER_CACHE_HINTS, 3,
                                 "Liger-Kernel's manner with cache hints, an int64 row index, 4096-column blocks"),
}
# What the submission rules refuse (the cell is not run; its feedback names the rule)
REFUSED = {"cheat_patches_the_grader": "assigns grader.check",
           "cheat_shadows_the_grader": "rebinds the name grader",
           "cheat_swaps_compare": "imports a module of the grader"}

GRADER_FILES = sorted((REPO / "grader" / "exercises").glob("*.py"))


def _notebook(answer: str):
    nb = classroom.untouched(DAY, NAME)
    cell(nb, NAME).source = answer
    return nb


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = classroom.copy_course(tmp_path_factory.mktemp("redteam-softmax") / "course")
    nbgrader(root, "generate_assignment", DAY, "--force")
    for student, (answer, _, _) in CLASS.items():
        classroom.submit(root, student, DAY, NAME, _notebook(answer))
    fixes = submissions.sanitize_day(root / "grading" / "submitted", root / "exercises" / DAY, DAY)
    watched = GRADER_FILES + sorted((root / "exercises" / DAY).glob("*.ipynb"))
    before = {p: p.read_bytes() for p in watched}
    os.environ["GRADER_SECRET_SEED"] = SEED
    try:
        runs = batch.autograde_day(root, DAY, timeout_s=240, students=list(CLASS),
                                   workers=None if DEVICE.is_gpu else 2, log=lambda *a: None)
    finally:
        del os.environ["GRADER_SECRET_SEED"]
        changed = [p for p, data in before.items() if p.read_bytes() != data]
        for p in changed:          # a write that got through must not damage the repository
            p.write_bytes(before[p])
    return root, {(r.student, r.notebook): r for r in runs}, fixes, changed


def _cells(root, student):
    return classroom.graded_cells(root, student, DAY, NAME)


def _message(c) -> str:
    return "\n".join(o.get("text", "") if o.output_type == "stream" else
                     (f"{o.get('ename')}: {o.get('evalue')}" if o.output_type == "error" else
                      json.dumps(o.get("data", {}))) for o in c.outputs)


@pytest.mark.parametrize("student", list(CLASS))
def test_each_submission_scores_what_it_deserves(graded, student):
    root, runs, fixes, _ = graded
    answer, points, what = CLASS[student]
    assert runs[(student, NAME)].status == "graded", (student, runs[(student, NAME)])   # the batch went on
    _, cells = _cells(root, student)
    got = classroom.points(cells[CORRECT])
    assert got == points, (student, what, got, _message(cells[CORRECT]))
    text = _message(cells[CORRECT])
    assert "checked by the grader's own process" in text or "CheckFailed" in text, text
    if student in REFUSED:
        said = " ".join(fixes[(student, NAME)])
        assert REFUSED[student] in said and "not run" in said, said
        assert "refused" in text or "not run" in text or "is not defined" in text, text
    if not DEVICE.is_gpu:            # speed needs a GPU: 0 for everyone, and said so
        assert classroom.points(cells[SPEED]) == 0
        assert "needs a CUDA GPU" in _message(cells[SPEED]), _message(cells[SPEED])


def test_the_answer_cell_cannot_write_the_graders_files(graded):
    require_sandbox()   # file modes keep the grader's files from the kernel's own user
    root, _, _, changed = graded
    assert not changed, f"written by a notebook: {changed}"
    nb, _ = _cells(root, "cheat_writes_the_grader")
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "WROTE" not in printed and "could not write" in printed, printed
    assert "READ" not in printed and "could not read" in printed, printed   # nor read the answers


def test_the_grader_s_functions_called_from_a_cell_leave_no_credit(graded):
    root, _, _, _ = graded
    nb, _ = _cells(root, "cheat_calls_the_grader")
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "grader call" in printed, printed   # they ran (and said what they did) ...
    # ... and the checker decided the graded cells anyway: 0 (test_each_submission_scores_what_it_deserves)


# HOLE (fails until fixed): in Triton's CPU interpreter a @triton.jit body is Python, so a plain helper it
# calls can compute the softmax with NumPy on the loaded block (`block.handle.data`). No ATen op runs, so the
# guard sees nothing; the check that the kernels compile for the GPU (grader.student.gpu_compile) is skipped
# at grading time (checks.py: `not grading()`), and where it runs it gives no verdict, since the helper is a
# global it cannot rebuild ("is not defined"). The notebook gets the 3 correctness points on the CPU. (On a
# GPU the kernel would not compile, so the cheat scores 0 there.)
def test_numpy_inside_the_interpreted_kernel_scores_0(graded):
    root, runs, _, _ = graded
    assert runs[("cheat_numpy_in_kernel", NAME)].status == "graded"
    _, cells = _cells(root, "cheat_numpy_in_kernel")
    assert classroom.points(cells[CORRECT]) == 0, _message(cells[CORRECT])
    assert "not Triton" in _message(cells[CORRECT]) and "np.exp" in _message(cells[CORRECT])

