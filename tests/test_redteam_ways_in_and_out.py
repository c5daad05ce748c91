"""A red team against the rules that count what enters a dropout kernel and what leaves a cross-entropy
kernel (tests/redteam_ways_in_and_out.py): its cheats fail with a message that names the way, and the
honest answers it found refused pass. Each runs one case, at a shape where the rule bites."""
import importlib.util
import sys

import pytest
import torch

import grader
import redteam_ways_in_and_out as answers
from conftest import DEVICE
from grader import exercises
from grader.compare import CheckFailed
from grader.student import checks

PRELUDE = "import torch\nimport triton\nimport triton.language as tl\n"


def _function(name: str, tmp_path, fn: str):
    """The answer's function, from a module of its own (Triton needs a kernel's source in a file)."""
    path = tmp_path / f"{name.lower()}.py"
    path.write_text(PRELUDE + getattr(answers, name))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return getattr(module, fn)


def _one_case(key: str, fn, shape):
    spec = exercises.get(key)
    seed = 12345
    gen = torch.Generator(device=DEVICE.torch_device).manual_seed(seed)
    checks._check_case(spec, fn, shape, torch.float32, DEVICE, gen, seed)


DROPOUT, CE = ("day5.dropout", "dropout"), ("day2.cross_entropy", "cross_entropy")

CHEATS = [
    # a mask drawn by Python's random, handed in as constexprs three other ways than arguments
    ("DROPOUT_MASK_IN_HEURISTICS", DROPOUT, (64, 512, 0.5), "bits of numbers handed to kernel launches"),
    ("DROPOUT_MASK_IN_AUTOTUNE_CONFIG", DROPOUT, (64, 512, 0.5), "bits of numbers handed to kernel launches"),
    ("DROPOUT_MASK_IN_GLOBAL_CONSTEXPRS", DROPOUT, (64, 512, 0.5), "bits of numbers handed to kernel launches"),
    # the interpreter runs a kernel's Python: a list's pop hands the mask in, its append the logits out
    ("DROPOUT_MASK_POPPED_FROM_A_LIST", DROPOUT, (7, 300, 0.1), "`MASKS.pop` (a call to a Python object"),
    ("CE_BLOCKS_APPENDED_TO_A_LIST", CE, (7, 1000), "`SINK.append` (a call to a Python object"),
    ("CE_PRINT_THROUGH_A_CALLABLE_OBJECT", CE, (7, 1000), "`OUT` (a call to a Python object"),
    # a copy kernel splits each row in halves for PyTorch to add, level after level
    ("CE_HALVES_COPIED_BY_A_KERNEL_AND_ADDED", CE, (20, 5003), "a sum, by additions"),
]


@pytest.mark.skipif(DEVICE.is_gpu, reason="the interpreter's ways (a kernel's Python); the counts run on a GPU too")
@pytest.mark.parametrize("name, task, shape, words", CHEATS, ids=[c[0] for c in CHEATS])
def test_a_cheat_fails_and_the_message_names_its_way(name, task, shape, words, tmp_path):
    key, fn = task
    with pytest.raises(CheckFailed) as failed:
        _one_case(key, _function(name, tmp_path, fn), shape)
    assert words in str(failed.value), str(failed.value)


def test_an_honest_workspace_of_a_few_columns_a_row_passes_with_many_rows(tmp_path):
    # its columns subtracted: an addition of two parts of a (rows, 8) buffer, more than a sum's 4 a row
    _one_case(*CE[:1], _function("HONEST_CE_PADDED_WORKSPACE", tmp_path, "cross_entropy"), (300, 50))


def test_an_error_before_any_program_ran_caught_by_a_version_fallback_passes(tmp_path):
    grader.check("day5.dropout", _function("HONEST_DROPOUT_LAUNCH_FALLBACK", tmp_path, "dropout"))
