"""Run one call (build, load weights, forward, backward) against an implementation.

The same code serves the worker (the learner's code) and the grader (the reference), so
both sides are driven identically. A call is a plain dict:
  ctor:      None (a function) or {"args": [...], "kwargs": {...}} for a module
  symbol:    None, or another function of the learner's file to call instead of the problem's own (its companion)
  how:       None, or how the call runs its function, in words, for messages ("at each position in turn ...")
  construct: True to only build the module (parameter names, constructor errors)
  state:     {parameter name: tensor} copied into the module, or None
  args:      positional arguments (tensors or None); the last one is valid_lens
  train:     module mode; seed: torch.manual_seed before the call; repeat: how many calls
  grad_out:  None, or one tensor (or None: not differentiated) per output: gradients of sum(output * grad_out)
  frozen:    positions of arguments that are no leaves of the gradients (settings passed as tensors)
  device:    "cpu" or "cuda"; dtype: the float dtype's name (module parameters are cast to it); n_out: how many tensors the call returns (1 or 2)
  structure: None, or the outputs' nesting as group sizes ([1, 2]: output, (k, v)); outputs come back flat
  then:      [{"args": [...] or None, "state": {...} or None}]: further runs on the same module after the first (weights
             reloaded where a state is given; args None: the first call's tensor objects again), each one more run of
             the result; "repeat" counts them all
  layout:    None, or "strided": every tensor input of two or more dims is handed over non-contiguous (the same
             values; axes -3 and -2 swapped in memory, as a model's (B, T, H, d).transpose(1, 2) is; a matrix
             column-major)
  kw:        None, or the names of the call's last arguments (its optional ones): passed by keyword, as the contract
             names them; the others by position
  alias:     None, or [[i, j], ...]: argument j is argument i's very tensor (values is keys, as in self-attention)
  warm:      None, or {"args": [...], "state": {...} or None}: a run first on the same module (or function), with
             those weights; then the call's weights are loaded and its values written into that run's very input
             tensors (where type, shape and dtype match), as a model reuses its buffers. Its outputs come back as
             result["earlier"]: [as that run returned them (copied), the same tensors after the call], for the
             grader to compare (a returned tensor that a later call writes again)
  no_grad:   True: every run under torch.no_grad() (inference; never with grad_out)
  leaves:    True: the floating inputs require grad, as a training step's do, with no backward (a memory call)
  hooks:     {name: options}: worker-side hooks (run/hooks/: a chain of calls, an allocation measurement, autograd
             refused, banned functions, NumPy arrays, or an extension's), each declared by the check or spec
             option that needs it
The result holds only plain tensors on the CPU, strings, numbers, lists and dicts.
"""
from __future__ import annotations

import contextlib
import inspect
import sys

import torch

from .hooks import Hook, active
from .wire import value_digest


MAX_STATE = 200
"""How many state_dict names a construct call reports."""


class CallError(Exception):
    """The implementation's output is not what the contract allows (wrong type, arity or shape)."""


class SignatureError(CallError):
    """The function does not take the contract's arguments by their names: its body never ran (a stub with other
    names is still a stub)."""


class GraderFault(Exception):
    """The grader's own code failed around the learner's call (preparing inputs, packing results):
    reported as a grader error, never as the learner's."""


@contextlib.contextmanager
def _ours(what: str):
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - anything here is the grader's failure
        raise GraderFault(f"{what}: {type(exc).__name__}: {exc}") from exc


def execute(call: dict, target, digests: bool = False) -> dict:
    """One call of the learner's code (or the reference's, a variant's), its result as a dict. `digests`: the
    inputs as they are after the call, as digests, instead of `changed` (a worker, whose own word the grader would not
    believe: it compares the digests with what it sent)."""
    device = torch.device(call.get("device", "cpu"))
    result: dict = {}
    fn = target if call.get("symbol") is None else beside(target, call["symbol"])
    warm = call.get("warm")
    if call.get("ctor") is not None:
        fn = target(*call["ctor"]["args"], **call["ctor"]["kwargs"])
        result["params"] = {n: list(p.shape) for n, p in fn.named_parameters()}
        if call.get("construct"):  # what its state_dict holds too: buffers must be non-persistent
            result["state"] = list(fn.state_dict())[:MAX_STATE]
            return result
        fn.to(device=device, dtype=getattr(torch, call["dtype"]))
        load_state(fn, call.get("state") or {})
        fn.train(bool(call.get("train")))
    want_grad = call.get("grad_out") is not None
    leaves = want_grad or bool(call.get("leaves"))  # inputs that require grad
    hooks = active(call)
    convert = next((h for h, _ in hooks if h.noun), None)  # a hook that converts what the call returns
    with _ours("preparing the inputs"):
        frozen = set(call.get("frozen") or ())  # settings passed as tensors (ALiBi's slopes): no gradient asked
        strided = call.get("layout") == "strided"
        args = [_prepare(a, device, leaves and i not in frozen, hooks, strided) for i, a in enumerate(call["args"])]
        for i, j in call.get("alias") or ():
            args[j] = args[i]
        # kept for `changed`, which the grader's own runs (a mistake's variant, a mutant) read; a worker says digests
        # instead (below), which the grader compares with what it sent
        before = None if digests else [_copy(a) for a in args]
        _seed(device, call.get("seed", 0))
    then = call.get("then") or []
    with contextlib.ExitStack() as stack:
        if call.get("no_grad") and not want_grad:
            stack.enter_context(torch.no_grad())
        states = [stack.enter_context(h.around(options)) for h, options in hooks]
        if warm:  # a run before, its outputs kept aside; then the call's weights, and its values in the same tensors
            _weights(fn, warm.get("state") or {}, device, call["dtype"])
            with _ours("preparing the earlier run's inputs"):
                earlier = [_prepare(a, device, False, hooks) for a in warm["args"]]
            before_out = _run(fn, earlier, call, hooks, convert)
            with _ours("copying the earlier run's outputs"):
                kept = [o.detach().cpu().clone() for o in before_out]  # as they came back, for the grader to compare
            _weights(fn, call.get("state") or {}, device, call["dtype"])
            with _ours("refilling the inputs"):
                args = [_refill(w, a) for w, a in zip(earlier, args)] + args[len(earlier):]
        runs = [_run(fn, args, call, hooks, convert) for _ in range(call.get("repeat", 1) - len(then))]
        for step in then:  # the same module again: another call, weights reloaded where given
            if step.get("state"):  # as the first load: a parameter gone or reshaped since is the module's doing
                _weights(fn, step["state"], device, call["dtype"])
            with _ours("preparing the next inputs"):  # None: the first call's very tensors again
                more = args if step["args"] is None else [_prepare(a, device, want_grad, hooks) for a in step["args"]]
            runs.append(_run(fn, more, call, hooks, convert))
    if then and isinstance(fn, torch.nn.Module):  # what its state_dict holds after the calls
        result["state"] = list(fn.state_dict())[:MAX_STATE]
    for (h, options), state in zip(hooks, states):
        h.finish(options, state, result)
    outs = runs[0]
    with _ours("reading the outputs"):
        result["outputs"] = [[o.detach().cpu() for o in run] for run in runs]
        result["devices"] = [o.device.type for o in outs]
        if before is not None:
            result["changed"] = [i for i, (a, b) in enumerate(zip(flat_inputs(args), flat_inputs(before)))
                                 if b is not None and not _same(a, b)]
        if warm:  # the earlier run's outputs as they came back and as they are now (a buffer written again?)
            result["earlier"] = [kept, [o.detach().cpu() for o in before_out]]
        if digests:  # a worker: the inputs as they are now, for the grader to compare with what it sent
            result["inputs"] = [None if (t := _as_tensor(a)) is None else value_digest(t) for a in flat_inputs(args)]
    if want_grad:
        names = call.get("names") or [f"output {i}" for i in range(len(outs))]
        for name, o, g in zip(names, outs, call["grad_out"]):  # the learner's shapes, before the grader multiplies
            if g is not None and tuple(o.shape) != tuple(g.shape):
                raise CallError(f"returned {name} of shape {tuple(o.shape)}, expected {tuple(g.shape)}")
        result["grads"] = _grads(fn, args, outs, call["grad_out"], device)
    return result


def beside(fn, symbol: str):
    """The function `symbol` defined beside `fn` (its module's globals: a file's, or a notebook's namespace), where a
    call runs another function of the learner's file than the problem's own (alibi_slopes beside alibi_attention); an
    AttributeError naming it where there is none."""
    scope = getattr(fn, "__globals__", None)
    if not isinstance(scope, dict):  # not a plain function: the module it names
        scope = vars(sys.modules.get(getattr(fn, "__module__", None) or "", sys))
    if not callable(scope.get(symbol)):
        raise AttributeError(f"the file defines no function `{symbol}` (the contract asks for one beside the others)")
    return scope[symbol]


def _seed(device, seed: int) -> None:
    # torch.manual_seed would also queue CUDA seeding with a captured stack trace: slow
    torch.random.default_generator.manual_seed(seed)
    if device.type == "cuda":
        torch.cuda.manual_seed(seed)


def _run(fn, args, call, hooks, convert) -> list:
    """One run of the call: the function once, or as a hook runs it (a chain: a prefill, then decoding steps)."""
    n_out, structure, names = call["n_out"], call.get("structure"), call.get("names")
    options = (call.get("hooks") or {}).get(convert.name) if convert else None

    kw = call.get("kw")

    def once(f, a):
        n = len(a) - len(kw or ())  # the last len(kw) arguments by keyword, the others by position
        if kw and n >= 0:
            named = dict(zip(kw, a[n:]))
            try:
                inspect.signature(f.forward if isinstance(f, torch.nn.Module) else f).bind(*a[:n], **named)
            except TypeError as exc:
                raise SignatureError(f"it does not take {', '.join(f'{k}=' for k in named)} by keyword, as the "
                                     f"contract names them ({exc})") from None
            except ValueError:  # no signature to read (a builtin): the call says
                pass
            value = f(*a[:n], **named)
        else:
            value = f(*a)
        return _outputs(value, n_out, convert, options, structure, names)

    runner = next(((h, o) for h, o in hooks if type(h).run is not Hook.run), None)
    return runner[0].run(runner[1], fn, args, once) if runner else once(fn, args)


def _weights(fn, state: dict, device, dtype: str) -> None:
    """`state` loaded into a module, in the call's device and dtype (a function has none)."""
    if isinstance(fn, torch.nn.Module):
        load_state(fn, {k: v.to(device=device, dtype=getattr(torch, dtype)) for k, v in state.items()})


def _refill(earlier, a):
    """`a`'s values written into the earlier run's own tensor (or array) where its type, shape and dtype match (the
    very object again, as a caller reuses its buffers), else `a` itself."""
    if type(earlier) is not type(a) or not hasattr(a, "shape") or earlier.shape != a.shape or earlier.dtype != a.dtype:
        return a
    if isinstance(a, torch.Tensor):
        with torch.no_grad():
            earlier.copy_(a)
    else:
        earlier[...] = a
    return earlier


def flat_inputs(args) -> list:
    """The call's arguments with tuples (a cache) spread out, in order: what is compared for side effects."""
    return [t for _, t in flat_positions(args)]


def flat_positions(args) -> list[tuple[int, object]]:
    """(argument position, value) for each argument, a tuple or list (a cache; the wire carries it as a list) spread
    out in order: the grader's view of the inputs a worker lists after a call (grading._inputs_changed)."""
    return [(i, t) for i, a in enumerate(args) for t in (a if isinstance(a, (tuple, list)) else (a,))]


def _prepare(a, device, want_grad, hooks=(), strided=False):
    if isinstance(a, (tuple, list)):  # a cache (k, v) or a recurrent state: the wire carries it as a list
        return tuple(_prepare(t, device, want_grad, hooks, strided) for t in a)
    if not isinstance(a, torch.Tensor):
        return a
    a = a.to(device).clone()
    if strided and a.dim() >= 3 and a.shape[-3] > 1 and a.shape[-2] > 1:  # the same values, laid out as a
        a = a.transpose(-3, -2).contiguous().transpose(-3, -2)  # (B, T, H, d) tensor's transpose to (B, H, T, d) is
    elif strided and a.dim() == 2 and a.shape[-1] > 1 and a.shape[-2] > 1:
        a = a.mT.contiguous().mT  # and a matrix column-major
    a = a.requires_grad_() if want_grad and a.is_floating_point() else a
    for h, options in hooks:
        a = h.prepare(options, a)
    return a


def load_state(module, state: dict) -> None:
    params = dict(module.named_parameters())
    for name, value in state.items():
        if name not in params:
            raise CallError(f"the module has no parameter `{name}` to copy the test weights into")
        if tuple(params[name].shape) != tuple(value.shape):
            raise CallError(f"parameter `{name}` has shape {tuple(params[name].shape)}, expected {tuple(value.shape)}")
        with torch.no_grad():
            params[name].copy_(value)


def _copy(a):
    if isinstance(a, tuple):
        return tuple(_copy(t) for t in a)
    if isinstance(a, torch.Tensor):
        return a.detach().clone()
    return a.copy() if type(a).__module__ == "numpy" and hasattr(a, "copy") else None


def _outputs(value, n_out: int, convert=None, options=None, structure=None, names=None) -> list:
    if structure:  # nested outputs, e.g. (output, (k, v)): checked, then spread out
        value = _flatten(value, structure, names or [f"output {i}" for i in range(n_out)])
    elif n_out == 1:
        value = (value,)
    kind = convert.noun if convert else "tensor"
    what = f"a {kind}" if n_out == 1 else f"a tuple of {n_out} {kind}s"
    if not isinstance(value, (tuple, list)) or len(value) != n_out:
        raise CallError(f"returned {_kind(value)}, expected {what}")
    labels = names if names and len(names) == n_out else [f"output {i}" for i in range(n_out)]
    if convert:
        try:
            return [convert.convert(options, v, label) for label, v in zip(labels, value)]
        except ValueError as exc:
            raise CallError(str(exc)) from None
    for label, v in zip(labels, value):
        if type(v) is not torch.Tensor and not isinstance(v, torch.nn.Parameter):
            raise CallError(f"returned {_kind(v)} where a torch.Tensor was expected")
        if v.layout != torch.strided or v.is_nested or v.device.type not in ("cpu", "cuda") or v.is_quantized:
            raise CallError(f"returned {label} as a {'nested' if v.is_nested else v.layout} {v.dtype} tensor on "
                            f"{v.device.type}, expected a dense tensor on the inputs' device")
        if v.dtype not in FLOAT_DTYPES:
            raise CallError(f"returned {label} as a tensor of dtype {v.dtype} where a floating-point tensor "
                            "(float16, bfloat16, float32 or float64: the inputs' dtype) was expected")
    return list(value)


FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
"""What an output may be (judge/context.py's decode checks it again on the grader's side, where it counts)."""


def _flatten(value, structure, names) -> tuple:
    groups, at = [], 0
    for size in structure:
        groups.append(names[at] if size == 1 else "(" + ", ".join(names[at:at + size]) + ")")
        at += size
    expected = "(" + ", ".join(groups) + ")"
    if not isinstance(value, (tuple, list)) or len(value) != len(structure):
        raise CallError(f"returned {_kind(value)}, expected {expected}")
    flat = []
    for v, size in zip(value, structure):
        if size == 1:
            flat.append(v)
        elif not isinstance(v, (tuple, list)) or len(v) != size:
            raise CallError(f"returned {_kind(v)} where a tuple of {size} was expected: {expected}")
        else:
            flat.extend(v)
    return tuple(flat)


def _as_tensor(a):
    if isinstance(a, torch.Tensor):
        return a.detach().cpu()
    if type(a).__module__ == "numpy" and hasattr(a, "shape"):
        return torch.from_numpy(a.copy())
    return None


def _kind(v) -> str:
    if isinstance(v, (tuple, list)):
        return f"a {type(v).__name__} of {len(v)}"
    return f"a {type(v).__module__}.{type(v).__qualname__}".replace("builtins.", "")


def _same(a, b) -> bool:
    if not isinstance(b, torch.Tensor):  # a NumPy input
        return a.shape == b.shape and a.dtype == b.dtype and bool((a == b).all())
    a, b = a.detach().cpu(), b.cpu()
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if torch.equal(a, b):
        return True
    return a.is_floating_point() and bool(((a == b) | (a.isnan() & b.isnan())).all())  # NaN stays NaN: unchanged


def _grads(fn, args, outs, grad_out, device) -> dict:
    leaves = {f"input:{i}": a for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.requires_grad}
    leaves.update({f"input:{i}.{j}": t for i, a in enumerate(args) if isinstance(a, tuple)  # a cache's or state's parts
                   for j, t in enumerate(a) if isinstance(t, torch.Tensor) and t.requires_grad})
    if isinstance(fn, torch.nn.Module):
        leaves.update({f"param:{n}": p for n, p in fn.named_parameters()})
    loss = sum((o * g.to(device=device, dtype=o.dtype)).sum() for o, g in zip(outs, grad_out) if g is not None)
    if not isinstance(loss, torch.Tensor) or not loss.requires_grad:  # no gradient reaches anything: the judge
        return {k: None for k in leaves}  # decides whether one should (an output that reads no input needs none)
    grads = torch.autograd.grad(loss, list(leaves.values()), allow_unused=True)
    return {k: (None if g is None else g.detach().cpu()) for k, g in zip(leaves, grads)}

