"""The grading checker (grader/checker): graded cells read right, the exchange read with care, and
verdicts that a notebook cannot fake, through the real pipeline (sanitize, the batch, nbgrader)."""
from __future__ import annotations

import json
import os
import textwrap

import nbformat
import pytest
import torch

import classroom
from adversarial_class import cell, filled, insert_before
from conftest import DEVICE, nbgrader, wrap_triton_takes_interpreted_kernels
from grader.pipeline import batch, submissions
from grader.student import serve
from grader.checker.cells import GradedCall, graded_calls
from grader.checker.exchange import Exchange, ExchangeError


# ---------------------------------------------------------------------------------------------------
# Which cells the checker takes over

def test_the_course_s_graded_cells_are_read_as_checks():
    source = ('grader.check("day1.vector_add", add)\n### BEGIN HIDDEN TESTS\n'
              'grader.check("day1.vector_add", add, hidden=True)\n### END HIDDEN TESTS')
    assert graded_calls(source) == [GradedCall("check", "day1.vector_add", "add"),
                                    GradedCall("check", "day1.vector_add", "add", hidden=True)]
    assert graded_calls('grader.check_speed("day3.matmul", mod.matmul, points=2)') == [
        GradedCall("check_speed", "day3.matmul", "mod.matmul", points=2.0)]


@pytest.mark.parametrize("source", [
    'x = 1\ngrader.check("day1.vector_add", add)',              # anything else in the cell
    'grader.check("day1.vector_add", lambda x, y: x + y)',       # not a name
    'grader.check(key, add)',                                    # the key not written out
    'grader.check("day1.vector_add", add, hidden=flag)',         # an option not written out
    'grader.check("day1.vector_add", add, tolerance=1)',         # an option the check has not
    'grader.credit(1, 2)', '', 'grader.check(',
])
def test_any_other_cell_runs_as_written(source):
    assert graded_calls(source) is None


# ---------------------------------------------------------------------------------------------------
# The exchange: what the checker (root, at grading time) agrees to read

@pytest.fixture
def exchange():
    ex = Exchange()
    yield ex
    ex.close()


def _described(ex, request, tensor):
    serve._write(ex.folder, request, {"ok": True}, [tensor])
    return ex.result(request)["outputs"][0]


def test_outputs_come_back_bit_for_bit(exchange):
    for t in (torch.tensor(2.5), torch.randn(3, 5).to(torch.bfloat16), torch.zeros(0, 4),
              torch.tensor([True, False]), torch.randn(7, 3).t()):
        got = exchange.tensor(_described(exchange, exchange.new_request(), t), "cpu", 1 << 20)
        assert got.dtype == t.dtype and torch.equal(got, t)


def test_a_link_in_place_of_a_result_is_not_followed(exchange, tmp_path):
    secret = tmp_path / "gradebook.json"
    secret.write_text('{"ok": true}')
    os.symlink(secret, os.path.join(exchange.folder, "r1.json"))
    with pytest.raises(ExchangeError, match="cannot be opened"):
        exchange.result("r1")


def test_a_hard_link_to_another_file_is_refused(exchange):
    described = _described(exchange, "r1", torch.ones(4))
    os.link(os.path.join(exchange.folder, described["file"]), os.path.join(exchange.folder, "copy.bin"))
    with pytest.raises(ExchangeError, match="not a file the notebook's kernel wrote"):
        exchange.tensor(described, "cpu", 1 << 20)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a file another user owns")
def test_a_file_of_another_user_is_refused(exchange):
    described = _described(exchange, "r1", torch.ones(4))
    os.chown(os.path.join(exchange.folder, described["file"]), 12345, 12345)
    with pytest.raises(ExchangeError, match="not a file the notebook's kernel wrote"):
        exchange.tensor(described, "cpu", 1 << 20)


def test_sizes_and_types_are_bounded(exchange):
    described = _described(exchange, "r1", torch.ones(1000))
    with pytest.raises(ExchangeError, match="more than the 100 expected"):
        exchange.tensor(described, "cpu", 100)                       # more than the answer can need
    with pytest.raises(ExchangeError, match="no dtype"):
        exchange.tensor(dict(described, dtype="object"), "cpu", 1 << 20)
    with pytest.raises(ExchangeError, match="is not 8000 bytes long"):
        exchange.tensor(dict(described, shape=[2000]), "cpu", 1 << 20)  # claims more than it wrote
    with pytest.raises(ExchangeError, match="outside the exchange folder"):
        exchange.tensor(dict(described, file="../r1-0.bin"), "cpu", 1 << 20)
    with open(os.path.join(exchange.folder, "r2.json"), "w") as f:
        f.write("not json")
    with pytest.raises(ExchangeError, match="not JSON"):
        exchange.result("r2")
    assert exchange.result("r3") is None                              # nothing handed over


# ---------------------------------------------------------------------------------------------------
# Through the real pipeline: day 1's vector_add and predictions, graded as a class

KERNEL = '''
    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offsets < n_elements
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask),
                 mask=mask)
    '''
WRONG_KERNEL = textwrap.dedent(KERNEL).replace(") + tl.load(y_ptr", ") - tl.load(y_ptr")
TUTORIAL_01 = '''
    DEVICE = triton.runtime.driver.active.get_active_torch_device()


    @triton.jit
    def add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
        pid = tl.program_id(axis=0)
        offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offsets < n_elements
        output = tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask)
        tl.store(output_ptr + offsets, output, mask=mask)


    def add(x: torch.Tensor, y: torch.Tensor):
        output = torch.empty_like(x)
        assert x.device == DEVICE and y.device == DEVICE and output.device == DEVICE
        n_elements = output.numel()
        grid = lambda meta: (triton.cdiv(n_elements, meta['BLOCK_SIZE']), )
        add_kernel[grid](x, y, output, n_elements, BLOCK_SIZE=1024)
        return output
    '''
# the same kernel under @triton.autotune with two configs, the grid taken from the chosen block size
AUTOTUNED = ('@triton.autotune(configs=[triton.Config({"BLOCK_SIZE": 256}, num_warps=4),\n'
             '                          triton.Config({"BLOCK_SIZE": 1024}, num_warps=8)], key=["n_elements"])\n'
             + textwrap.dedent(KERNEL).lstrip() + textwrap.dedent('''

                 def add(x, y):
                     out = torch.empty_like(x)
                     n_elements = x.numel()
                     add_kernel[lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)](x, y, out, n_elements)
                     return out
                 '''))
# PyTorch's documented way to wrap a Triton kernel as an operator (torch.library.triton_op, wrap_triton)
TRITON_OP = textwrap.dedent(KERNEL) + textwrap.dedent('''

    @torch.library.triton_op("student_course::add", mutates_args={})
    def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        torch.library.wrap_triton(add_kernel)[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK_SIZE=1024)
        return out
    ''')


WRONG_ADD = {"tl.store(out_ptr + offsets, x + y, mask=mask)": "tl.store(out_ptr + offsets, x - y, mask=mask)"}
SEED = "424242"

# student -> (notebook, the notebook, points of the graded cell(s) named, what it tries)
def _class():
    def wrong(*cells_before):
        nb = filled("day1", "vector_add", WRONG_ADD)
        for source in cells_before:
            insert_before(nb, "add", textwrap.dedent(source))
        return nb

    tabulated = filled("day1", "predict_runtime")
    table = {(2**20, 1000.0): 0.012582912, (10**8, 3350.0): 0.35820895522388063, (12_345, 900.0): 0.00016460}
    cell(tabulated, next(c.metadata["nbgrader"]["grade_id"] for c in tabulated.cells
                         if "def predict_add_ms" in c.source)).source = (
        f"TABLE = {table!r}\n\ndef predict_add_ms(n, bandwidth_gbs):\n"
        f"    return TABLE.get((n, bandwidth_gbs), 1.0)\n\n"
        f"def predict_mul_add_eager_ms(n, bandwidth_gbs):\n    return 6 * n * 4 / (bandwidth_gbs * 1e9) * 1e3\n")
    honest = filled("day1", "vector_add")
    insert_before(honest, "add", 'import os\nprint("SEED SEEN:", os.environ.get("GRADER_SECRET_SEED"))')
    # Idioms of honest code from other projects, which the submission rules (or, for keyword
    # arguments, the interpreter's bounds check) once refused
    idioms = filled("day1", "vector_add")
    cell(idioms, "add").source += textwrap.dedent('''

        torch.backends.cuda.matmul.allow_tf32 = True      # a switch of PyTorch's, as many projects set


        class Plans:
            """Launch settings kept per size, as a helper class of a larger project would."""
            def __init__(self):
                self.plans = {}

            def get(self, n):
                if n not in self.plans:
                    self.plans[n] = (getattr(triton, "cdiv")(n, 1024), 1024)
                return self.plans[n]


        PLANS = Plans()


        def add(x, y):
            out = torch.empty_like(x)
            blocks, block = PLANS.get(int(torch.tensor(x.numel()).item()))
            # tensors passed by keyword, as Liger-Kernel launches its kernels
            add_kernel[(blocks,)](x_ptr=x, y_ptr=y, out_ptr=out, n_elements=x.numel(), BLOCK_SIZE=block)
            return out
        ''')
    insert_before(idioms, "test_add_correct", "print('first values:', add(torch.ones(3), torch.ones(3)).tolist())")

    def answered(source):
        """vector_add with this answer cell: a kernel of its own and an add around it."""
        nb = filled("day1", "vector_add")
        cell(nb, "add").source = textwrap.dedent(source)
        return nb

    def wrong_with(source):
        return answered(WRONG_KERNEL + textwrap.dedent(source))

    return {
        "honest": ("vector_add", honest, {"test_add_correct": 3}),
        "honest_idioms": ("vector_add", idioms, {"test_add_correct": 3}),
        "wrong": ("vector_add", wrong(), {"test_add_correct": 0}),
        # grader.check replaced through objects no submission rule names: it no longer decides anything
        "replaces_check": ("vector_add", wrong('''
            import operator
            operator.setitem(operator.attrgetter("__dict__")(grader), "check", lambda *a, **k: None)
            '''), {"test_add_correct": 0}),
        # the kernel's side of the protocol replaced: it hands back nothing, or a forged summary (graded
        # past the rules, which refuse operator.attrgetter("__dict__"): see PAST_THE_RULES)
        "hands_back_nothing": ("vector_add", wrong('''
            import operator
            import grader.student.serve as kernel_side
            served = operator.attrgetter("__dict__")(kernel_side)
            operator.setitem(served, "kernel_case", lambda *a, **k: None)
            '''), {"test_add_correct": 0}),
        "forged_summary": ("vector_add", wrong('''
            import json, operator, os
            def forged(fn, key, shape, dtype, device, seed, dy_shape, timed, folder, request):
                os.symlink("/etc/hostname", os.path.join(folder, request + "-0.bin"))
                json.dump({"ok": True, "outputs": [{"file": request + "-0.bin", "dtype": "uint8",
                           "shape": [4], "device": "cpu"}]}, open(os.path.join(folder, request + ".json"), "w"))
            import grader.student.serve as kernel_side
            served = operator.attrgetter("__dict__")(kernel_side)
            operator.setitem(served, "kernel_case", forged)
            '''), {"test_add_correct": 0}),
        # Honest code as other projects write it: Triton's tutorial 01 as published (its DEVICE comes from
        # Triton's driver), an autotuned kernel, debugging prints inside the graded function
        "tutorial_01": ("vector_add", answered(TUTORIAL_01), {"test_add_correct": 3}),
        "autotuned": ("vector_add", answered(AUTOTUNED), {"test_add_correct": 3}),
        "triton_op": ("vector_add", answered(TRITON_OP), {"test_add_correct": 3 if WRAP_TRITON_HERE else 0}),
        "prints": ("vector_add", answered(textwrap.dedent(KERNEL) + textwrap.dedent("""
            def add(x, y):
                out = torch.empty_like(x)
                add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK_SIZE=1024)
                print("add:", out, out[:4].tolist())
                return out
            """)), {"test_add_correct": 3}),
        # A wrong kernel, the right answer made by PyTorch where the guard once did not look: a forged
        # kernel side behind a shadowed __import__, an autotuner's pruning function, a launch argument's
        # property, a tensor's base class, NumPy through DLPack, a replaced PyTorch operator
        "shadows_import": ("vector_add", wrong_with('''
            class Forged:
                def kernel_case(self, fn, key, shape, dtype_name, device, seed, dy_shape, timed, folder, request):
                    raise SystemExit  # would write x + y computed by PyTorch


            def __import__(name, *args, **kwargs):
                return Forged()
            '''), {"test_add_correct": 0}),
        "autotune_prune": ("vector_add", answered('''
            def prune(configs, named_args, **kwargs):
                torch.add(named_args["x_ptr"], named_args["y_ptr"], out=named_args["out_ptr"])
                return configs[:1]


            @triton.autotune(configs=[triton.Config({"BLOCK_SIZE": 1024}), triton.Config({"BLOCK_SIZE": 512})],
                             key=["n", "tick"], prune_configs_by={"early_config_prune": prune})
            @triton.jit
            def add_kernel(x_ptr, y_ptr, out_ptr, n, tick, BLOCK_SIZE: tl.constexpr):
                pass


            calls = [0]


            def add(x, y):
                out = torch.empty_like(x)
                calls[0] += 1
                add_kernel[(1,)](x, y, out, x.numel(), calls[0])
                return out
            '''), {"test_add_correct": 0}),
        "argument_property": ("vector_add", answered('''
            box = {}


            class Probe:
                @property
                def dtype(self):
                    torch.add(box["x"], box["y"], out=box["out"])
                    return "probe"


            @triton.autotune(configs=[triton.Config({"BLOCK_SIZE": 16}), triton.Config({"BLOCK_SIZE": 32})],
                             key=["n", "tick"])
            @triton.jit
            def add_kernel(out_ptr, n, tick, probe: tl.constexpr, BLOCK_SIZE: tl.constexpr):
                pass


            def add(x, y):
                out = torch.empty_like(x)
                box.update(x=x, y=y, out=out, tick=box.get("tick", 0) + 1)
                add_kernel[(1,)](out, x.numel(), box["tick"], Probe())
                return out
            '''), {"test_add_correct": 0}),
        "base_class_numpy": ("vector_add", wrong_with('''
            def add(x, y):
                add_kernel[(1,)](x, y, torch.empty_like(x), 0, BLOCK_SIZE=16)
                return torch.from_numpy(super(torch.Tensor, x).numpy() + super(torch.Tensor, y).numpy())
            '''), {"test_add_correct": 0}),
        "dlpack_wrapper": ("vector_add", wrong_with('''
            import numpy as np


            class Capsule:
                def __init__(self, t):
                    self.capsule = torch.utils.dlpack.to_dlpack(t)

                def __dlpack__(self, stream=None, **kwargs):
                    return self.capsule

                def __dlpack_device__(self):
                    return (1, 0)


            def add(x, y):
                add_kernel[(1,)](x, y, torch.empty_like(x), 0, BLOCK_SIZE=16)
                return torch.from_numpy(np.from_dlpack(Capsule(x)) + np.from_dlpack(Capsule(y)))
            '''), {"test_add_correct": 0}),
        "replaces_an_operator": ("vector_add", wrong_with('''
            box = {}
            lib = torch.library.Library("at" + "en", "IMPL")   # a name the rules cannot read
            lib.impl("zeros_like", lambda t, **kwargs: torch.ops.aten.add.Tensor(t, box["y"]), "CPU")


            def add(x, y):
                box["y"] = y
                out = torch.zeros_like(x)
                add_kernel[(1,)](x, y, out, 0, BLOCK_SIZE=16)
                return out
            '''), {"test_add_correct": 0}),
        # answers copied for the visible cases only: the checker's random cases catch them
        "tabulated": ("predict_runtime", tabulated, {"test_predict_add_model": 0, "test_predict_mul_add_model": 1}),
    }


WRAP_TRITON_HERE = wrap_triton_takes_interpreted_kernels()


# Submissions graded without the submission rules: the rules refuse the route they take to the kernel's
# side of the protocol, and these show that the checker stands without them.
PAST_THE_RULES = ("hands_back_nothing", "forged_summary")


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    root = classroom.copy_course(tmp_path_factory.mktemp("checker") / "course")
    students = _class()
    nbgrader(root, "generate_assignment", "day1", "--force")
    for student, (name, nb, _) in students.items():
        if student not in PAST_THE_RULES:
            classroom.submit(root, student, "day1", name, nb)
    submissions.sanitize_day(root / "grading" / "submitted", root / "exercises" / "day1", "day1")
    for student in PAST_THE_RULES:     # as if a route around the rules had been found
        name, nb, _ = students[student]
        classroom.submit(root, student, "day1", name, nb)
    os.environ["GRADER_SECRET_SEED"] = SEED
    try:
        batch.autograde_day(root, "day1", timeout_s=300, students=list(students), log=lambda *a: None)
    finally:
        del os.environ["GRADER_SECRET_SEED"]
    return root, students


@pytest.mark.parametrize("student", list(_class()))
def test_the_checker_s_verdict_is_what_is_scored(graded_class, student):
    root, students = graded_class
    name, _, expected = students[student]
    nb, graded = classroom.graded_cells(root, student, "day1", name)
    for grade_id, points in expected.items():
        assert classroom.points(graded[grade_id]) == points, (student, grade_id, graded[grade_id].outputs)
        text = json.dumps(graded[grade_id].outputs)
        # The verdict is the checker's own (not a cell the kernel ran), and a failure says why.
        assert "checked by the grader's own process" in text or "CheckFailed" in text, text
        assert graded[grade_id].metadata["grading_seconds"] >= 0   # kept for whoever makes grading faster
    if not DEVICE.is_gpu:
        speed = graded.get("test_add_speed")
        assert speed is None or classroom.points(speed) == 0


def test_the_kernel_never_holds_the_secret_seed(graded_class):
    root, _ = graded_class
    nb, _ = classroom.graded_cells(root, "honest", "day1", "vector_add")
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "SEED SEEN: None" in printed and SEED not in printed


def test_failures_say_what_is_wrong_without_the_expected_prediction(graded_class):
    root, _ = graded_class
    _, graded = classroom.graded_cells(root, "tabulated", "day1", "predict_runtime")
    message = json.dumps(graded["test_predict_add_model"].outputs)
    assert "too high" in message or "too low" in message
    _, graded = classroom.graded_cells(root, "forged_summary", "day1", "vector_add")
    assert "could not read your function's output" in json.dumps(graded["test_add_correct"].outputs)
    _, graded = classroom.graded_cells(root, "hands_back_nothing", "day1", "vector_add")
    assert "could not call your function `add` (it handed nothing back)" in json.dumps(graded["test_add_correct"].outputs)


def test_a_verdict_is_written_as_nbgrader_scores_it_whatever_the_kernel_would_print():
    # A display formatter in the kernel once turned a speed cell's float into text, which nbgrader took
    # for a pass: the checker writes the cell's outputs itself.
    from nbgrader.utils import determine_grade
    from grader.checker.verdicts import Outcome
    from grader.checker.headless import _outputs_of

    def graded(outcome):
        c = nbformat.v4.new_code_cell("grader.check_speed(...)", metadata={"nbgrader": {
            "grade": True, "solution": False, "points": 2, "grade_id": "speed", "locked": True}})
        c.outputs = _outputs_of(outcome, 7)
        return determine_grade(c)[0]

    assert graded(Outcome(["yours 1 ms"], points=0.75)) == 0.75
    assert graded(Outcome(["OK"])) == 2
    assert graded(Outcome(["yours 9 ms"], error=("CheckFailed", "slow"))) == 0
    assert graded(Outcome([], error=("GPURequired", "no GPU"))) == 0


def test_the_speed_verdict_credits_a_time_and_refuses_an_impossible_one(monkeypatch):
    # The checker's arithmetic on a GPU's figures, without a GPU: vector add moves 805 MB at 2**26
    # float32 elements, so 0.27 ms is 2982 GB/s (as torch.add on an H100) and 0.1 ms would be 8053 GB/s.
    import asyncio
    from grader.checker import verdicts
    from grader.student.checks import CheckFailed as Failed
    from grader.device import Device

    class Exchange:
        def forget(self, request):
            pass

    flags = []
    checker = verdicts.Checker(None, Exchange(), flag=flags.append)
    checker.dev = Device("cuda", "NVIDIA H100 80GB HBM3", (9, 0), "torch", "triton")
    reported = {}

    async def ask(title, call, function, *arguments):
        return {"ok": True, "request": "r1"}

    async def case(*arguments):
        pass

    class Clock:   # what the grader's clock (grader.checker.timer) measured, per round
        socket_path = "clock"

        def request(self, *arguments):
            pass

        def result(self):
            return {"yours": [reported["ms"]] * 3, "baseline": [0.27] * 3}

    monkeypatch.setattr(checker, "_ask", ask)
    monkeypatch.setattr(checker, "_case", case)
    monkeypatch.setattr(checker, "_clock", Clock)
    monkeypatch.setattr(verdicts.timing, "copy_bandwidth_gbs", lambda: 3000.0)
    call = GradedCall("check_speed", "day1.vector_add", "add", points=2.0)

    reported["ms"] = 0.27
    lines, points = asyncio.run(checker.check_speed(call))
    assert points == 2.0 and any("1.00x" in line for line in lines) and flags == []
    reported["ms"] = 0.5                     # 0.54x: a little above half the 0.9x target
    assert 0 < asyncio.run(checker.check_speed(call))[1] < 0.5
    reported["ms"] = 0.1
    with pytest.raises(Failed, match="beyond what NVIDIA H100 80GB HBM3 can physically do"):
        asyncio.run(checker.check_speed(call))
    assert len(flags) == 1 and "not credited" in flags[0]
    # the graded cell's outcome keeps what was measured, as data, credited or not
    outcome = asyncio.run(checker.outcome([call]))
    (record,) = outcome.records
    assert outcome.error and record["credited"] is False and record["score"] == "0.00/2"
    reported["ms"] = 0.5
    (record,) = asyncio.run(checker.outcome([call])).records
    assert record["credited"] and record["ratio"] == pytest.approx(0.54) and round(record["gbs"]) == 1611


def test_a_flag_of_the_checker_reaches_the_run_log():
    log = ("[AutogradeApp | INFO] Autograding x\n[Execute | WARNING] grading checker flagged: vector add: "
           "0.1000 ms is beyond what NVIDIA H100 80GB HBM3 can do: not credited\n")
    assert batch.flags_in(log) == "flagged: vector add: 0.1000 ms is beyond what NVIDIA H100 80GB HBM3 can do: not credited"
    assert batch.flags_in("[AutogradeApp | INFO] fine\n") == ""
