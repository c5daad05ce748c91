"""The checker's verdicts: correctness, prediction and speed, decided outside the student's process.

For each case the checker draws a seed (from the instructor's secret seed if one is set, else fresh
randomness), has the student's kernel run the function on the inputs that seed makes
(`grader.student.serve`), makes the same inputs itself, computes the expected values and compares. The
student's process never holds an expected value, a hidden case before it is asked, or the seed of a
case it has not yet been given. A prediction is asked for on the visible cases and on random ones and
judged here; a failure says which way it is off, never the answer.

Speed: the result at the timed size is checked here first; then the grader's clock (`timer`, a process
of its own that the kernel cannot reach) times the student's calls and the PyTorch baseline the same
way and checks every timed call's output; a time beyond what the GPU can physically do is not credited.
"""
from __future__ import annotations

import contextlib
import random
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass, field

import torch

from grader import device as _device
from grader import exercises, hardware, timing
from grader.exercises import reference_figures
from grader.student import serve
from grader.checker.exchange import ExchangeError
from grader.compare import CheckFailed
from grader.student.checks import (HIDDEN_PREDICTION_CASES, SpeedResult, _as_tuple, _compare_outputs, _dtype_name,
                                   expected_gradients, how_far, judged_dy)

# Results beyond these fractions of the GPU's ceilings are not physically possible: a kernel timed
# there skipped work (or the timing was fooled), and it is not credited.
CEILING_MARGIN = 1.05


class NoGPU(RuntimeError):
    """A check that needs a GPU ran where the grader has none: it earns no points."""


@dataclass
class Outcome:
    """What a graded cell shows and scores: text, then either an error (0 points) or partial points."""
    lines: list = field(default_factory=list)
    error: tuple | None = None      # (name, message)
    points: float | None = None
    records: list = field(default_factory=list)   # what was measured, as data (SpeedResult.record)


class Checker:
    """The verdicts of one notebook's graded cells. `run_in_kernel(code)` runs code in the student's
    kernel and returns its error as text, or None."""

    def __init__(self, run_in_kernel, exchange, secret_seed: str | None = None, force_cpu: bool = False,
                 flag=lambda message: None, speed_checks: bool = False, refused=()):
        self.run_in_kernel = run_in_kernel
        self.flag = flag    # for the instructor's run log: what the checker refused as impossible
        self.refused = list(refused)   # why each of the notebook's cells not run at grading was refused
        self.exchange = exchange
        self.rng = random.Random(int(secret_seed)) if secret_seed else random.SystemRandom()
        self.dev = _device.probe(force_cpu)
        self.seconds = defaultdict(float)  # where the checker's time goes, for the run's log
        self._outcome = Outcome()          # the graded cell's, while outcome() runs its checks
        self._timer = None                 # the grader's clock (grader.checker.timer), once a speed check needs it
        if speed_checks and self.dev.is_gpu:
            self._clock()                  # it starts (imports, CUDA) while the correctness checks run

    @contextlib.contextmanager
    def _timed(self, what: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[what] += time.perf_counter() - start

    def summary(self) -> str:
        return ", ".join(f"{what} {s:.1f} s" for what, s in sorted(self.seconds.items(), key=lambda kv: -kv[1]))

    async def outcome(self, calls) -> Outcome:
        """Run the graded cell's checks in order; the first failure ends the cell, as an exception would."""
        outcome = self._outcome = Outcome()
        for call in calls:
            try:
                method = {"check": self.check, "check_speed": self.check_speed,
                          "check_prediction": self.check_prediction,
                          "check_prediction_on_gpu": self.check_prediction_on_gpu}[call.kind]
                lines, points = await method(call)
            except CheckFailed as e:
                outcome.error = ("CheckFailed", str(e))
                return outcome
            except NoGPU as e:
                outcome.error = ("GPURequired", str(e))
                return outcome
            outcome.lines += lines
            if points is not None:
                outcome.points = points
        return outcome

    # -- talking to the kernel ------------------------------------------------------------------------

    async def _ask(self, title: str, call, function: str, *arguments) -> dict:
        """Run `grader.student.serve.<function>(<student function>, arguments..., folder, request)` in the kernel."""
        request = self.exchange.new_request()
        args = ", ".join([call.function, *map(repr, arguments), repr(self.exchange.folder), repr(request)])
        # An import statement, not a name looked up in the notebook: `import` takes Python's own
        # __import__, which no submitted cell may rebind (a cell's `def __import__` shadows only names).
        code = f"import grader.student.serve\ngrader.student.serve.{function}({args})"
        with self._timed(f"in the notebook's kernel ({function})"):
            error = await self.run_in_kernel(code)
        try:
            result = self.exchange.result(request)
        except ExchangeError as e:
            raise CheckFailed(f"{title}: the grader could not read what your notebook handed over: {e}.") from None
        if result is None:
            said = f"{title}: the grader could not call your function `{call.function}`" + \
                (f": {error}" if error else " (it handed nothing back).")
            if error and error.startswith("NameError") and self.refused:
                said += "".join(f"\n  A cell you handed in was not run at grading: it {why}." for why in self.refused[:3])
                said += (f"\n  If that cell defines `{call.function}`, rewrite it to keep the rules (the notebook's "
                         f"introduction lists them) and hand it in again.")
            raise CheckFailed(said) from None
        if not result.get("ok"):
            raise CheckFailed(str(result.get("message", f"{title}: failed"))[:4000])
        result["request"] = request
        return result

    def _outputs(self, title: str, result: dict, limit: int) -> tuple:
        try:
            with self._timed("reading outputs"):
                return tuple(self.exchange.tensor(d, self.dev.torch_device, limit) for d in result.get("outputs", ()))
        except ExchangeError as e:
            raise CheckFailed(f"{title}: the grader could not read your function's output: {e}.") from None
        finally:
            self.exchange.forget(result["request"])

    # -- correctness ------------------------------------------------------------------------------------

    async def _case(self, spec, call, index: int, dtype) -> None:
        seed = self.rng.randrange(2**31)
        device = self.dev.torch_device
        shape = serve.case_shape(spec, self.dev.is_gpu, index)
        label = f"shape {shape}, {_dtype_name(dtype)}"
        if spec.judge:
            return await self._judged_case(spec, call, shape, dtype, seed, index, label)
        with self._timed("expected values"):
            expected, dy_shape = self._expected(spec, shape, dtype, device, seed)
        result = await self._ask(spec.title, call, "kernel_case", call.key, list(shape), _dtype_name(dtype), device,
                                 seed, dy_shape, index == serve.SPEED)
        limit = 4 * max([e.numel() * e.element_size() for e in expected] + [0]) + 2**20
        got = self._outputs(spec.title, result, limit)
        _compare_outputs(spec, got, expected, dtype, label)
        return result

    async def _judged_case(self, spec, call, shape, dtype, seed, index, label) -> None:
        """A random operation's case: the kernel hands over its outputs on every call the exercise names,
        and the exercise's judge decides from the inputs, made here from the same seed."""
        args, gen = serve.case_inputs(spec, shape, dtype, self.dev.torch_device, seed)
        result = await self._ask(spec.title, call, "kernel_case", call.key, list(shape), _dtype_name(dtype),
                                 self.dev.torch_device, seed, None, index == serve.SPEED)
        calls = len(spec.judge_calls(args)) + int(spec.judged_backward)
        limit = 4 * calls * args[0].numel() * args[0].element_size() + 2**20
        got = self._outputs(spec.title, result, limit)
        spec.judge(args, got, judged_dy(spec, args, gen), label)

    async def _compile_ahead(self, spec, call, cases) -> None:
        """Have the kernel compile what the student's function launches on every case, side by side,
        before the cases run one by one (serve.compile_ahead). It decides nothing: a failure is the
        checked cases' to report."""
        with self._timed("compiling ahead"), contextlib.suppress(CheckFailed):
            result = await self._ask(spec.title, call, "compile_ahead", call.key,
                                     [[list(serve.case_shape(spec, self.dev.is_gpu, i)), _dtype_name(d)]
                                      for i, d in cases], self.dev.torch_device)
            self.exchange.forget(result["request"])

    @staticmethod
    def _expected(spec, shape, dtype, device, seed) -> tuple:
        """(expected outputs, shape of the output gradient or None) of one case, from its seed."""
        args, gen = serve.case_inputs(spec, shape, dtype, device, seed)
        if not spec.backward:
            return _as_tuple(spec.reference(*args)), None
        expected, dy = expected_gradients(spec, args, gen, dtype)
        return expected, list(dy.shape)

    async def check(self, call):
        spec = exercises.get(call.key)
        shapes = serve.case_shapes(spec, self.dev.is_gpu)
        visible = len(spec.gpu_shapes if self.dev.is_gpu else spec.cpu_shapes)
        indices = range(len(shapes) if call.hidden else visible)
        dtypes = spec.dtypes(self.dev)
        if self.dev.is_gpu:
            await self._compile_ahead(spec, call, [(i, d) for d in dtypes for i in indices]
                                      + [(serve.SPEED, spec.timed_dtype(self.dev))])
        for dtype in dtypes:
            for index in indices:
                await self._case(spec, call, index, dtype)
        kind = "hidden and visible" if call.hidden else "visible"
        return [f"OK: {spec.title} is correct on {len(indices)} {kind} shapes x "
                f"{', '.join(_dtype_name(d) for d in dtypes)} (checked by the grader's own process)."], None

    # -- predictions -------------------------------------------------------------------------------------

    async def _answers(self, spec, call, cases) -> list:
        result = await self._ask(spec.title, call, "predictions", [list(c) for c in cases])
        self.exchange.forget(result["request"])
        answers = result.get("answers")
        if not isinstance(answers, list) or len(answers) != len(cases) or \
                not all(isinstance(a, (int, float)) for a in answers):
            raise CheckFailed(f"{spec.title}: your function's answers could not be read as numbers.")
        return [float(a) for a in answers]

    async def check_prediction(self, call):
        spec = exercises.get(call.key)
        hidden = [spec.sample(self.rng) for _ in range(HIDDEN_PREDICTION_CASES)] if spec.sample else []
        cases = list(spec.cases) + hidden
        for case, got in zip(cases, await self._answers(spec, call, cases)):
            want = spec.model(*case)
            if not abs(got - want) <= spec.formula_tolerance * abs(want):
                raise CheckFailed(f"{spec.title}: for arguments {tuple(case)} your answer, {got:.4g} {spec.unit}, "
                                  f"is {how_far(got, want)}; within {100 * spec.formula_tolerance:g}% of the "
                                  f"model passes.\n  hint: {spec.hint}")
        return [f"OK: {spec.title} is right on {len(spec.cases)} cases and {len(hidden)} hidden ones "
                f"(checked by the grader's own process)."], None

    def _need_gpu(self, what: str):
        if not self.dev.is_gpu:
            raise NoGPU(f"{what} needs a CUDA GPU, and the grading machine has none: nothing was measured. "
                        f"Speed is graded on the instructor's GPU; here it scores 0.")

    async def check_prediction_on_gpu(self, call):
        spec = exercises.get(call.key)
        self._need_gpu(f"Checking the {spec.title} against a measurement")
        bandwidth = timing.copy_bandwidth_gbs()
        case, measured = spec.measure(bandwidth, self.rng.randrange(2**25, 2**27 + 1, 2**20))
        (predicted,) = await self._answers(spec, call, [case])
        off = abs(predicted - measured) / measured
        lines = [f"{spec.title} on {self.dev.name} (measured copy bandwidth {bandwidth:.0f} GB/s), arguments {case}:",
                 f"  predicted {predicted:.4f} ms, measured {measured:.4f} ms: off by {100 * off:.0f}% "
                 f"(allowed {100 * spec.gpu_tolerance:.0f}%)"]
        if off > spec.gpu_tolerance:
            raise CheckFailed("\n".join(lines) + f"\n{spec.title}: your prediction is {predicted / measured:.2f}x "
                              f"the measured time.\n  hint: {spec.hint}")
        return lines, None

    # -- speed ---------------------------------------------------------------------------------------

    def _clock(self):
        """This notebook's timing helper (grader.checker.timer), started at the first speed check."""
        from grader.checker.timer import Timer
        if self._timer is None:
            self._timer = Timer(self.exchange.folder, self.exchange.uid, self.dev.torch_device)
        return self._timer

    def close(self) -> None:
        if self._timer is not None:
            self._timer.close()
            self._timer = None

    async def check_speed(self, call):
        from grader.checker.timer import TimerError
        spec = exercises.get(call.key)
        self._need_gpu(f"The speed check of {spec.title}")
        dtype = spec.timed_dtype(self.dev)
        # A wrong result is worth nothing however fast: checked at the timed size first (the clock then
        # checks every timed call's result as well).
        case = await self._case(spec, call, serve.SPEED, dtype)
        memory = self._memory(spec, case, dtype) if spec.memory_target else None
        try:
            clock = self._clock()
            clock.request(call.key, _dtype_name(dtype), spec.speed_shape)
            try:
                timed = await self._ask(spec.title, call, "timed_batches", call.key, clock.socket_path)
            except CheckFailed:
                self.close()   # it may still wait for a kernel that will not come: the next check starts another
                raise
            self.exchange.forget(timed["request"])
            compiled = timed.get("compiled")
            with self._timed("timing (the clock's end)"):
                measured = clock.result()
        except TimerError as e:
            self.close()
            raise CheckFailed(f"{spec.title}: {e}") from None
        if "error" in measured:
            raise CheckFailed(str(measured["error"])[:4000])
        try:
            rounds = [(float(y), float(b)) for y, b in zip(measured["yours"], measured["baseline"])]
        except (KeyError, TypeError, ValueError):
            raise CheckFailed(f"{spec.title}: the timing of your function could not be read.") from None
        yours = statistics.median(y for y, _ in rounds)
        baseline = statistics.median(b for _, b in rounds)
        if not yours > 0:
            raise CheckFailed(f"{spec.title}: your function's timing ({yours}) is not a positive time.")
        result = SpeedResult(spec.title, spec.speed_shape, _dtype_name(dtype), self.dev.name,
                             spec.baseline_name, yours, baseline, spec.target, speed_hint=spec.speed_hint)
        if spec.bytes_moved:
            result.gbs = spec.bytes_moved(spec.speed_shape, dtype) / (yours * 1e-3) / 1e9
            result.ceiling_gbs = timing.copy_bandwidth_gbs()
        if spec.flops:
            result.tflops = spec.flops(spec.speed_shape, dtype) / (yours * 1e-3) / 1e12
            result.peak_tflops = hardware.peak_tflops(self.dev.name)
        if memory is not None:
            result.yours_bytes, result.baseline_bytes = memory
            result.memory_target, result.memory_hint = spec.memory_target, spec.memory_hint
        lines = result.report().splitlines()
        beyond = (result.gbs is not None and result.gbs > CEILING_MARGIN * result.ceiling_gbs) or \
            (result.tflops is not None and result.peak_tflops and result.tflops > CEILING_MARGIN * result.peak_tflops)
        if beyond:
            rates = []
            if result.gbs is not None:
                rates.append(f"{result.gbs:.0f} GB/s")
            if result.tflops is not None:
                rates.append(f"{result.tflops:.0f} TFLOP/s")
            self._outcome.records.append(dict(result.record(0.0, call.points), credited=False))
            self.flag(f"{spec.title}: {yours:.4f} ms is beyond what {self.dev.name} can do "
                      f"({', '.join(rates)}): not credited")
            raise CheckFailed("\n".join(lines) + f"\n{spec.title}: this time is beyond what {self.dev.name} can "
                              f"physically do, so the work was not all done in the timed calls: not credited.")
        points = round(result.credit * call.points, 4)
        from grader.student.gpu_compile import usage_said   # (lazily, as before: the checker seldom needs it)
        lines += usage_said(compiled, self.dev)
        lines += reference_figures.said(spec.key, self.dev.name)
        self._outcome.records.append(dict(result.record(points, call.points), credited=True))
        lines.append(f"  speed score: {points:.2f} of {call.points:g} (timed by the grader's clock, outside your process)")
        return lines, points


    def _memory(self, spec, case: dict, dtype) -> tuple:
        """(yours, the baseline's) peak memory of a step at the timed shape. Yours, as the kernel measured
        it under the guard (checks.step_memory), must be at least the gradients the step returns; the
        baseline's is measured here."""
        from grader.student.checks import output_shape, step_leaves, step_memory
        yours = case.get("memory") if isinstance(case, dict) else None
        if not isinstance(yours, int) or isinstance(yours, bool):
            raise CheckFailed(f"{spec.title}: the memory of your step at the timed shape could not be read.")
        gen = torch.Generator(device=self.dev.torch_device).manual_seed(self.rng.randrange(2**31))
        args = step_leaves(spec.make_inputs(spec.speed_shape, dtype, self.dev.torch_device, gen))
        least = sum(a.numel() * a.element_size() for a in args if isinstance(a, torch.Tensor) and a.requires_grad)
        if yours < least:
            self.flag(f"{spec.title}: a step reported {yours} bytes of memory, less than the {least} of its gradients")
            raise CheckFailed(f"{spec.title}: your step's memory was reported as {yours / 2**30:.3f} GiB, less than "
                              f"the {least / 2**30:.3f} GiB of the gradients it returns: not credited.")
        dy = torch.randn(output_shape(spec, args), generator=gen, device=self.dev.torch_device).to(dtype)
        with self._timed("the baseline's memory"):
            baseline = step_memory(spec, spec.baseline, args, dy, student=False)
        return yours, baseline

