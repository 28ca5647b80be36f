"""The kernels stage's backward (section 23): dQ, dK, dV as Triton kernels, graded on a machine with no GPU.

The reference passes; the interpreter's counts of its loads and stores equal the IO formula of its design (dQ added
with atomics) element for element; what a pre-pass kernel stored is the kernels' own to load, while an atomics
buffer the launcher filled with values is not; rows of a zeroed atomics buffer that no block updates may keep their
zeros; and a tensor descriptor made in a kernel asks for the allocator a GPU launch needs."""
from __future__ import annotations

import importlib.util

import pytest
import torch

from attnkit.problems import get, unavailable
from attnkit.run.kernels import NO_ALLOCATOR, interpreting, unwritten, watching
from conftest import SOLUTIONS, grade_shared

PID = "triton_flash_attention_backward"
pytestmark = pytest.mark.skipif(unavailable(get(PID)) is not None, reason="Triton is not installed (.[kernels])")


def _module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    with interpreting():
        spec.loader.exec_module(module)
    return module


def _call(Tq, Tk, causal, dtype=torch.float32):
    from attnkit.problems.triton_flash_attention_backward import forward

    q, k, v, do = (torch.randn(2, 1, t, 16, dtype=torch.float64) for t in (Tq, Tk, Tk, Tq))
    o, lse = forward(q, k, v, causal)
    return [t.to(dtype) for t in (q, k, v, o)] + [lse.to(dtype), do.to(dtype), causal, 16, 16]


def test_the_reference_gets_full_marks():
    from test_kernels import _compiling

    result = grade_shared(SOLUTIONS, [PID], sandbox=_compiling()).problem(PID)
    assert result.status == "passed" and result.score == result.max_score == get(PID).max_points


@pytest.mark.parametrize("Tq,Tk,causal", [(37, 53, False), (37, 53, True), (53, 37, True), (62, 29, True)])
def test_the_counts_are_the_io_of_the_atomic_design(Tq, Tk, causal):
    """Loads and stores, counted, equal the spec's formula for dQ added with atomics; the pre-pass's D, loaded by the
    main kernel, is no foreign memory; dQ's rows that no key block sees (causal, Tq > Tk) keep the zeros they began
    with and count as the kernels' own."""
    from attnkit.problems.triton_flash_attention_backward import _io

    ref = _module(SOLUTIONS / f"{PID}.py", "tfab_ref_for_counts")
    args = _call(Tq, Tk, causal)
    with interpreting(), watching(args[:6]) as watch:
        dq, dk, dv = ref.triton_flash_attention_backward(*args)
    assert (watch.loaded, watch.stored) == _io({}, args)["dq"]
    assert (watch.outside, watch.foreign, len(watch.launches)) == (0, 0, 2)
    assert unwritten(watch, [dq, dk, dv], ["dq", "dk", "dv"]) == []
    dq[0, 0, -1, 0] += 1
    assert unwritten(watch, [dq, dk, dv], ["dq", "dk", "dv"]) == ["dq: changed after the last kernel stored it"]


def test_an_atomics_buffer_the_launcher_filled_is_foreign_memory():
    """dQ computed in torch and put in the buffer the kernel adds to: the kernels would add to values they did not
    compute, so the counts name the updates foreign."""
    source = (SOLUTIONS / f"{PID}.py").read_text().replace(
        "    dq = torch.zeros(q.shape, dtype=work, device=q.device)  # accumulated with atomics: starts at 0\n",
        "    dq = torch.full(q.shape, 0.5, dtype=work, device=q.device)\n")
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "filled.py"
        path.write_text(source)
        module = _module(path, "tfab_filled")
    args = _call(37, 53, False)
    with interpreting(), watching(args[:6]) as watch:
        module.triton_flash_attention_backward(*args)
    assert watch.foreign == 37 * 16 * 2  # every element of dQ, once: the first update of each


def test_a_tensor_descriptor_made_in_a_kernel_asks_for_the_gpu_s_allocator():
    import triton

    code = ("import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef copy(X, Y, N, B: tl.constexpr):\n"
            "    d = tl.make_tensor_descriptor(X, shape=[N], strides=[1], block_shape=[B])\n"
            "    tl.store(Y + tl.arange(0, B), d.load([0]), mask=tl.arange(0, B) < N)\n")
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "desc.py"
        path.write_text(code)
        module = _module(path, "tfab_desc")
    x, y = torch.arange(16, dtype=torch.float32), torch.zeros(16)
    with interpreting(), pytest.raises(Exception) as raised:  # the interpreter wraps it: InterpreterError
        module.copy[(1,)](x, y, 16, B=16)
    assert NO_ALLOCATOR.split(":")[0] in str(raised.value) and "triton.set_allocator(...)" in str(raised.value)
    triton.set_allocator(lambda size, alignment, stream: torch.empty(size, dtype=torch.int8))
    try:
        with interpreting():
            module.copy[(1,)](x, y, 16, B=16)
        assert torch.equal(x, y)
    finally:
        from triton.runtime import _allocation

        _allocation._allocator.set(_allocation._NULL_ALLOCATOR)
    from triton.runtime.interpreter import interpreter_builder

    assert "create_make_tensor_descriptor" not in vars(interpreter_builder)  # put back after interpreting()


def test_a_share_stored_where_it_must_be_added_is_counted_as_stored_again():
    """dQ stored by every key block's program (the catalogued dq_not_atomic): the last store wins, and the counts say
    how many elements a store of the same launch replaced; the reference replaces none."""
    import tempfile
    from pathlib import Path

    from attnkit.diagnose.mistakes import apply

    mistake = next(m for m in get(PID).mistakes if m.id == "dq_not_atomic")
    args = _call(37, 53, False)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "stored.py"
        path.write_text(apply((SOLUTIONS / f"{PID}.py").read_text(), mistake))
        wrong = _module(path, "tfab_stored")
    right = _module(SOLUTIONS / f"{PID}.py", "tfab_ref_for_stores")
    counts = []
    for module in (right, wrong):
        with interpreting(), watching(args[:6]) as watch:
            dq = module.triton_flash_attention_backward(*args)[0]
        counts.append(watch.restored.get(dq.untyped_storage().data_ptr(), 0))
    assert counts == [0, 37 * 16 * 2 * 3]  # 4 key blocks of 16 for Tk = 53: each row's first store, then 3 more


@pytest.mark.parametrize("seed", [0, 20261122])
def test_every_drawn_call_carries_the_forward_of_its_own_inputs(seed):
    """o and lse depend on is_causal, drawn after the inputs, and on q and k, which the stability check moves: on
    every call of every check, they are the forward of the call's q, k, v (as rounded) and causal flag, lse float32
    (float64 for float64 inputs)."""
    from attnkit.judge.plan import draw
    from attnkit.problems.triton_flash_attention_backward import forward

    seen = 0
    for case in draw(get(PID), seed).values():
        args = case.call["args"]
        if len(args) < 6 or not isinstance(args[3], torch.Tensor) or args[0].dim() != 4:
            continue  # a constructor's or a bad argument's call
        o, lse = forward(*(a.double() for a in args[:3]), bool(args[6]) if len(args) > 6 else False)
        dtype = args[0].dtype
        assert args[4].dtype == (torch.float64 if dtype == torch.float64 else torch.float32), case.key
        assert torch.equal(args[3], o.to(dtype)) and torch.equal(args[4], lse.to(args[4].dtype)), case.key
        seen += 1
    assert seen >= 30


def _patched(*patch) -> str:
    """The reference with each (old, new) replaced, each old found exactly once."""
    text = (SOLUTIONS / f"{PID}.py").read_text()
    for old, new in patch:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


COMPILED_NOOP = (  # a red team's: returns at once where compiled, told apart by a tuple constexpr global
    ("\n\n@triton.jit\ndef _attention_backward_delta",
     "\n\n@triton.jit\ndef _probe():\n    pass\n\n\nMODE = tl.constexpr((0,) if hasattr(_probe, \"device_caches\") else (1,))\n"
     "\n\n@triton.jit\ndef _attention_backward_delta"),
    ("    start_n = tl.program_id(0)\n", "    if MODE[0] == 0:\n        return\n    start_n = tl.program_id(0)\n"))
JIT_CONSTEXPR = (  # a red team's finding: the exponential passed as a jit function constexpr, once a grader error
    ("\n\n@triton.jit\ndef _attention_backward_kv", "\n\n@triton.jit\ndef _exp(x):\n    return tl.exp(x)\n"
     "\n\n@triton.jit\ndef _attention_backward_kv"),
    ("IS_CAUSAL: tl.constexpr):\n    \"\"\"Program (j, l)", "IS_CAUSAL: tl.constexpr, EXP: tl.constexpr):\n    \"\"\"Program (j, l)"),
    ("tl.where(allowed, tl.exp(s - ", "tl.where(allowed, EXP(s - "),
    ("IS_CAUSAL=is_causal, num_warps=8)", "IS_CAUSAL=is_causal, EXP=_exp, num_warps=8)"))


def _red_team(tmp_path, name):
    """A red team's submission (tests/kernels/<name>.py, or the source itself), graded: {check id: its result} of the
    failing checks, and the score."""
    from conftest import make_impl
    from test_kernels import _compiling

    source = name if "\n" in name else (SOLUTIONS.parent / "tests" / "kernels" / f"{name}.py").read_text()
    result = grade_shared(make_impl(tmp_path, {f"{PID}.py": source}, base=None), [PID], sandbox=_compiling()).problem(PID)
    return {c.id: c for c in result.checks if c.status == "failed"}, result.score


VALUES = {"parity_float64", "parity_float32", "oracle", "block_invariance", "stability"}


def test_outputs_the_launcher_changed_between_launches_count_for_no_check(tmp_path):
    """A kernel fills the outputs, the launcher overwrites them with torch's gradients, and a kernel that does
    nothing is launched on them: the launcher changed what a kernel stored, and no check's values count."""
    failing, _ = _red_team(tmp_path, "backward_overwrite_then_noop")
    assert {"traffic"} | VALUES <= set(failing)
    assert "the launcher changed memory before a launch (kernel argument `DQ`)" in failing["traffic"].message
    assert "the outputs are not the kernels' work" in failing["oracle"].message


def test_bytes_no_kernel_stored_are_foreign_whatever_the_pointer_type(tmp_path):
    """torch's gradients packed into the bytes of an int64 buffer that a kernel did not store (it stored each lane's
    first byte), decoded by a kernel: the loads are foreign, byte for byte, and no check's values count."""
    failing, _ = _red_team(tmp_path, "backward_first_byte_smuggle")
    assert {"traffic"} | VALUES <= set(failing)
    assert "none of the call's inputs and that no kernel stored" in failing["oracle"].message


def test_traffic_is_counted_in_the_tensor_s_elements_whatever_the_pointer_type(tmp_path):
    """K and V reloaded per query block through int64 pointers (two float32 elements a lane): over the bound."""
    failing, _ = _red_team(tmp_path, "backward_int64_pairs_kv_reloaded")
    assert set(failing) == {"traffic"}, failing
    assert "the tiled algorithm loads at most" in failing["traffic"].message


def test_a_kernel_that_differs_when_compiled_by_a_tuple_global_fails_onchip(tmp_path):
    failing, _ = _red_team(tmp_path, _patched(*COMPILED_NOOP))
    assert set(failing) == {"onchip"}, failing
    assert "defines other kernels when Triton's interpreter is off" in failing["onchip"].message


def test_a_jit_function_passed_as_a_constexpr_compiles(tmp_path):
    failing, score = _red_team(tmp_path, _patched(*JIT_CONSTEXPR))
    assert not failing and score == get(PID).max_points, failing


def test_a_lane_wider_than_the_tensor_s_elements_counts_as_several():
    """A float32 tensor loaded through an int64 pointer: each lane moves two of its elements."""
    import tempfile
    from pathlib import Path

    code = ("import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef pairs(X, Y, N, B: tl.constexpr):\n"
            "    offs = tl.arange(0, B)\n"
            "    wide = tl.load(X.to(tl.pointer_type(tl.int64), bitcast=True) + offs, mask=offs < N // 2)\n"
            "    tl.store(Y.to(tl.pointer_type(tl.int64), bitcast=True) + offs, wide, mask=offs < N // 2)\n")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "pairs.py"
        path.write_text(code)
        module = _module(path, "tfab_pairs")
    x, y = torch.arange(32, dtype=torch.float32), torch.zeros(32)
    with interpreting(), watching([x]) as watch:
        module.pairs[(1,)](x, y, 32, B=16)
    assert torch.equal(x, y) and (watch.loaded, watch.stored, watch.outside) == (32, 32, 0)


@pytest.mark.parametrize("warps, refused", [(None, None), (2, None), (3, "num_warps=3"), (2.0, "num_warps as float")])
def test_launch_options_are_triton_s_to_judge(tmp_path, warps, refused):
    """num_warps=None is Triton's default (4), as on a GPU; a value Triton refuses is the learner's error, said in
    Triton's terms, never the grader's failure (a mutant passing None once made the grader fail)."""
    from attnkit.run.kernel_compile import LearnerCompileError, compile_launches

    path = tmp_path / "copy.py"
    path.write_text("import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef copy(X, Y, N, B: tl.constexpr):\n"
                    "    offs = tl.arange(0, B)\n    tl.store(Y + offs, tl.load(X + offs, mask=offs < N), mask=offs < N)\n")
    module = _module(path, "tfab_copy")
    x, y = torch.arange(16, dtype=torch.float32), torch.zeros(16)
    with interpreting(), watching([x]) as watch:
        module.copy[(1,)](x, y, 16, B=16, num_warps=warps)
    assert torch.equal(x, y)
    if refused is None:
        (name, shared, regs, spill, used), = compile_launches(watch.launches, (80,))[80]
        assert name == "copy" and used == (4 if warps is None else warps)
    else:
        with pytest.raises(LearnerCompileError, match=refused):
            compile_launches(watch.launches, (80,))


def test_a_float32_buffer_returned_as_it_is_fails_the_half_precision_call(tmp_path):
    """dQ accumulated in float32 (atomics) and returned without the conversion to q's dtype: right in float32 and
    float64, wrong for the float16 call, the one that runs in half precision (a mutant of the reference once
    survived every check)."""
    failing, _ = _red_team(tmp_path, _patched(("return dq.to(q.dtype), dk, dv", "return dq, dk, dv")))
    assert set(failing) == {"onchip"}, failing
    assert "returned dq as float32 for float16 inputs; the contract: float16" in failing["onchip"].message


def test_a_wrong_default_is_graded_too(tmp_path):
    """The GPU-sized traffic call leaves is_causal and the block sizes to the signature's defaults where they equal
    them: a default of is_causal=True (a mutant of the reference once passed every check) fails there."""
    failing, _ = _red_team(tmp_path, _patched(("do, is_causal=False, BLOCK_M=64", "do, is_causal=True, BLOCK_M=64")))
    assert "traffic" in failing, failing
