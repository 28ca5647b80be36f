"""Spec: causal linear attention (Katharopoulos et al. 2020), its chunked and recurrent forms, section 21 of the serving
stage."""
import torch

from ..model.roles import Arg, Out
from ..model.spec import Method, Mistake, Problem
from ._common import LLM_BANNED, lead_fit

PHI = "return torch.nn.functional.elu(x) + 1"
MAPPED = "q, k = _phi(queries), _phi(keys)"
CHECKED = "if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1):"
CHUNK = "C = chunk_size or max(T, 1)"
CAUSAL = "causal = torch.ones(n, n, dtype=torch.bool, device=queries.device).tril()"
NUM = "num = qc @ S + a @ vc  # (B, H, n, dv)"
DEN = "den = qc @ z[..., None] + a.sum(-1, keepdim=True)  # (B, H, n, 1), > 0: the j = i term alone is"
OUT = "outs.append(num / den)"
STEP_OUT = "return num / den, (S, z)"
STEP_S = "S = S + k[..., :, None] * v_t[..., None, :]  # new tensors: the given state is never modified"
STEP_Z = "    z = z + k\n"
STEP_READ = ("    num = (q[..., None, :] @ S).squeeze(-2)  # (B, H, dv)\n"
             "    den = (q * z).sum(-1, keepdim=True)  # (B, H, 1)\n")

MISTAKES = (
    Mistake("epsilon", "an epsilon added to the denominator (phi(q) . z + 1e-6)",
            ((OUT, "outs.append(num / (den + 1e-6))"), (STEP_OUT, "return num / (den + 1e-6), (S, z)")),
            explain="phi(x) = elu(x) + 1 > 0, so phi(q_i) . z_i > 0 already: the term j = i alone makes it positive. An "
                    "epsilon, copied from code whose feature map can reach 0, shifts every output by about eps / "
                    "(phi(q) . z) of its size: ~1e-7 where phi(q) . z is about 10, a thousand times float64's tolerance, and "
                    "far more where the features are small (elu(x) + 1 is e^x for x < 0). The contract has none.",
            hint="out_i = phi(q_i)^T S_i / (phi(q_i)^T z_i), with no epsilon."),
    Mistake("phi_no_one", "phi(x) = elu(x) without the + 1",
            ((PHI, "return torch.nn.functional.elu(x)"),),
            explain="elu(x) is negative for x < 0, down to -1: the features stop being positive, the denominator "
                    "phi(q) . z can cross 0 and the output explodes or flips sign. elu(x) + 1 is the paper's map: positive "
                    "everywhere.",
            hint="phi(x) = F.elu(x) + 1 (alpha = 1)."),
    Mistake("phi_relu", "phi(x) = relu(x) (features of 0 for x < 0)",
            ((PHI, "return torch.relu(x)"),),
            explain="relu gives exact zeros: a query whose features are all negative has phi(q) = 0 and 0 / 0 = NaN, and "
                    "the weights are not the paper's. The contract's map is elu(x) + 1 > 0.",
            hint="phi(x) = F.elu(x) + 1."),
    Mistake("keys_not_mapped", "phi applied to the queries only (raw keys in S and z)",
            ((MAPPED, "q, k = _phi(queries), keys"),),
            explain="Both sides go through the feature map: phi(q_i)^T phi(k_j) replaces exp(q_i . k_j). Raw keys can be "
                    "negative, so the sums z_i and the denominator lose their sign.",
            hint="q, k = phi(queries), phi(keys); S and z sum phi(k_j)."),
    Mistake("future_keys_in_chunk", "every key of a chunk attended by all its queries (no causal mask inside the "
            "chunk)",
            ((CAUSAL, "causal = torch.ones(n, n, dtype=torch.bool, device=queries.device)"),),
            explain="Inside a chunk, query i may only use the chunk's keys j <= i: the (n, n) products need a lower "
                    "triangular mask. Without it each query reads the chunk's later tokens (with chunk_size=None, the "
                    "whole future).",
            hint="a = (phi(q_c) @ phi(k_c)^T) * tril(ones(n, n)), then num = phi(q_c) @ S + a @ v_c."),
    Mistake("state_not_carried", "each chunk attended alone (the earlier chunks' S and z never added)",
            ((NUM, "num = a @ vc"), (DEN, "den = a.sum(-1, keepdim=True)")),
            explain="The running sums S and z carry every earlier chunk's keys: without them each chunk starts from "
                    "nothing, and only chunk_size=None (one chunk) comes out right.",
            hint="num = phi(q_c) @ S + a @ v_c; den = phi(q_c) @ z + a.sum(-1); then add the chunk to S and z."),
    Mistake("last_chunk_dropped", "the last, partial chunk dropped",
            (("for t0 in range(0, T, C):", "for t0 in range(0, T - C + 1, C):"),
             ("return torch.cat(outs, dim=-2)",
              "return torch.cat(outs + [values.new_zeros(*values.shape[:-2], T - sum(o.shape[-2] for o in outs), dv)], "
              "dim=-2)")),
            explain="When chunk_size does not divide T the last chunk is shorter; a loop over whole chunks only never "
                    "reaches the last positions.",
            hint="for t0 in range(0, T, C): queries[..., t0:t0 + C, :] (slicing stops at T)."),
    Mistake("chunk_size_ignored", "chunk_size ignored: the whole sequence as one chunk (the (T, T) products)",
            ((CHUNK, "C = max(T, 1)"),),
            explain="The values are right, but a chunk size exists so that memory grows with chunk_size, not T: the "
                    "(T, T) products of the parallel form are what the chunked form avoids.",
            hint="Take chunk_size positions at a time, carrying S (d, dv) and z (d,) from one chunk to the next."),
    Mistake("chunk_counted_twice", "a chunk's own keys counted twice: S and z updated with the chunk before its outputs, "
            "then its own products added",
            ((NUM, "num = qc @ (S + kc.transpose(-2, -1) @ vc) + a @ vc"),
             (DEN, "den = qc @ (z + kc.sum(-2))[..., None] + a.sum(-1, keepdim=True)")),
            explain="Inside a chunk, the earlier chunks come from the running sums and the chunk's own keys from the "
                    "masked (n, n) products. Adding the chunk to S and z first counts its keys twice, the later ones "
                    "(j > i) among them: only chunk_size=None, one chunk with no earlier ones, is spared.",
            hint="Read S and z for the chunk's outputs first, then add the chunk: S = S + phi(k_c)^T v_c."),
    Mistake("heads_moved_last", "the output returned as (B, T, H, dv), heads moved next to the features",
            (("return torch.cat(outs, dim=-2)", "return torch.cat(outs, dim=-2).transpose(1, 2)"),),
            explain="The contract's output keeps the heads where the inputs have them, (B, H, T, dv). A model's layer "
                    "transposes afterwards, to concatenate the heads; this function does not.",
            hint="return the chunks concatenated along T: (B, H, T, dv)."),
    Mistake("chunk_size_not_checked", "chunk_size < 1 (or a bool, or a float) accepted",
            ((CHECKED, "if chunk_size is not None and chunk_size < 0:"),),
            explain="A chunk of 0 or -2 positions means nothing, and True or 2.5 is not a size: the contract raises "
                    "ValueError for each (an integer argument that is a bool counts as invalid).",
            hint="if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or "
                 "chunk_size < 1): raise ValueError(...)."),
    Mistake("values_mapped", "phi applied to the values too",
            (("values[..., t0:t0 + C, :]  # the last may be partial", "_phi(values)[..., t0:t0 + C, :]  # the last may be partial"),
             ("S = S + k[..., :, None] * v_t[..., None, :]", "S = S + k[..., :, None] * _phi(v_t)[..., None, :]")),
            explain="The feature map replaces the softmax's exp(q . k): it applies to queries and keys. The values are "
                    "mixed as they are.",
            hint="S sums phi(k_j) v_j^T, with the values unchanged."),
    Mistake("step_reads_before_adding", "linear_attention_step reads the state before adding the new token",
            ((STEP_S + "\n" + STEP_Z + STEP_READ, STEP_READ.lstrip() + "    " + STEP_S + "\n" + STEP_Z),),
            explain="The new token is part of its own sum (j <= i): add phi(k_t) v_t^T and phi(k_t) first, then read. "
                    "Read before, the first step divides 0 by 0 and every later one misses its own token.",
            hint="S = S + phi(k_t) v_t^T; z = z + phi(k_t); then out_t = phi(q_t)^T S / phi(q_t)^T z."),
    Mistake("step_state_in_place", "linear_attention_step adds to the given state in place (S += ...)",
            ((STEP_S, "S += k[..., :, None] * v_t[..., None, :]"), (STEP_Z, "    z += k\n")),
            explain="The state passed in belongs to the caller, who may keep it (to branch a generation, or retry a "
                    "step): += changes their tensors. The contract returns a new state and leaves the given one as it "
                    "was.",
            hint="S = S + phi(k_t) v_t^T (a new tensor), likewise z."),
)


def _fit(cfg, variant):
    """(B, H, T, d) always: T the drawn number of queries (keys the same), d = dk = dq."""
    cfg = lead_fit(cfg, {**variant, "rank": 4})
    return {**cfg, "T": cfg["Tq"], "Tk": cfg["Tq"]}


def _features(shape, gen):
    """Standard normal times 2, a tenth of the entries moved to U(-8, -6), and every feature of position 0 in
    U(-8, -7.5): phi down near e^-8, inside [-8, 1e4]; the first row's denominator phi(q_0) . phi(k_0) is then about
    d * 1e-7, where an epsilon of even 1e-12 changes the result by more than float64's tolerance."""
    x = torch.randn(*shape, generator=gen, dtype=torch.float64) * 2
    low = torch.rand(*shape, generator=gen) < 0.1
    x = torch.where(low, -8 + 2 * torch.rand(*shape, generator=gen, dtype=torch.float64), x.clamp(-8, 1e4))
    x[..., :1, :] = -8 + 0.5 * torch.rand(*x[..., :1, :].shape, generator=gen, dtype=torch.float64)
    return x


def _inputs(cfg, gen):
    """queries and keys (B, H, T, d) in [-8, 1e4] (the contract's range), values (B, H, T, dv) standard normal."""
    B, H, T, d = cfg["B"], cfg["H"], cfg["T"], cfg["d"]
    return [_features((B, H, T, d), gen), _features((B, H, T, d), gen),
            torch.randn(B, H, T, cfg["dv"], generator=gen, dtype=torch.float64)]


def _oracle(call):
    """the masked (T, T) parallel form, written here: weights phi(q_i) . phi(k_j) for j <= i, each row divided by its sum"""
    q, k, v = call["args"][:3]
    phi = lambda x: torch.where(x > 0, x + 1, x.exp())  # noqa: E731 - elu(x) + 1 written another way
    a = (phi(q) @ phi(k).transpose(-2, -1)).tril()
    return [(a @ v) / a.sum(-1, keepdim=True)]


def _state(cfg, gen, P=5):
    """The sums (S, z) over P earlier tokens: what a prefill would have left."""
    B, H, d, dv = cfg["B"], cfg["H"], cfg["d"], cfg["dv"]
    k = torch.nn.functional.elu(_features((B, H, P, d), gen)) + 1
    v = torch.randn(B, H, P, dv, generator=gen, dtype=torch.float64)
    return (k.transpose(-2, -1) @ v, k.sum(-2))


STEPS = {"split": [0, 1, 2], "dim": 2, "carry": 3, "carry_outputs": [1, 2]}


def _companions(cfg, gen):
    """linear_attention_step stepped over every position from no state and from a given one (out stacked over T, the
    last state); one step alone, with the state left to its default and given, in float32, with gradients (of
    the inputs and of the given state's parts), and given a state at B = H = 1 (a path of its own for a batch of one
    must not update the given state in place either); stepped in float32 with every feature of q and k at -8."""
    q, k, v = _inputs(cfg, gen)
    state = _state(cfg, gen)
    step = "linear_attention_step"
    t = [x[:, :, -1] for x in _inputs(cfg, gen)]
    given = _state(cfg, gen)
    grads = [torch.randn(cfg["B"], cfg["H"], cfg["dv"], generator=gen, dtype=torch.float64),
             torch.randn(cfg["B"], cfg["H"], cfg["d"], cfg["dv"], generator=gen, dtype=torch.float64),
             torch.randn(cfg["B"], cfg["H"], cfg["d"], generator=gen, dtype=torch.float64)]
    return [{"symbol": step, "args": [q, k, v], "steps": STEPS},
            {"symbol": step, "args": [q, k, v, state], "steps": STEPS},
            {"symbol": step, "args": t},
            {"symbol": step, "args": t + [given]},
            {"symbol": step, "args": [x.float() for x in t] + [tuple(x.float() for x in given)], "dtype": "float32"},
            {"symbol": step, "args": t + [given], "grad_out": grads},
            {"symbol": step, "args": [x[:1, :1].clone() for x in t] + [tuple(x[:1, :1].clone() for x in given)]},
            # float32 at the contract's lowest features (q = k = -8: elu + 1 = 3.4e-4, phi(q) . z ~ 1e-7 per step): an
            # epsilon of 1e-6 moves these outputs by 10% or more; the cancellation 1 - 0.9997 costs float32 2e-4, so
            # they are compared at float16's tolerance (3e-2)
            {"symbol": step, "args": [torch.full_like(q, -8.0).float(), torch.full_like(k, -8.0).float(), v.float()],
             "steps": STEPS, "dtype": "float32", "tolerance": "float16"}]


def _amplify(args, state, cfg):
    """Queries and keys across the contract's whole range: a quarter of the features up to 1e4, a tenth at -8."""
    gen = torch.Generator().manual_seed(cfg["T"] * 101 + cfg["d"])
    for x in args[:2]:
        r = torch.rand(x.shape, generator=gen, dtype=torch.float64)
        x.copy_(torch.where(r < 0.25, 1e4 * r * 4, torch.where(r > 0.9, torch.full_like(x, -8.0), x)))


def _half(args):
    """Half-precision calls: features of q and k at -2 or above (elu(x) + 1 = e^x keeps 2 to 3 digits there; at -8 it
    is 3e-4 after the subtraction 1 - 0.9997, which bfloat16 rounds to 0, and 0 / 0 follows)."""
    for x in args[:2]:
        x.clamp_(min=-2.0)


def _memory_fit(cfg):
    """T = 64 >= 8*C for every measured C (3 to 8), T > max(d, dv), d, dv >= 2, L = 2. The (T, T) products and a
    cumulative sum over all T of phi(k_j) v_j^T break the bound; with C = 8, (4C)^2 > T*dv: a fixed chunk of 32, or four
    times the one asked for, breaks it too. A cumulative sum within each chunk (C*d*dv <= T*dv, as min(d, dv) <= 8)
    fits: its memory grows with chunk_size, not T, and issue 26 names it a correct style."""
    return {**cfg, "B": 1, "H": 2, "Tq": 64, "Tk": 64, "T": 64, "dq": 6, "dk": 6, "d": 6, "dv": 10,
            "small_chunk": 3 + cfg["dv"] % 5}


def _memory(cfg, args):
    """A seeded small chunk (3 to 7: a partial last one) and chunks of 8: max(S, L*C*max(C, d, dv), L*d*dv)."""
    L, d, dv, T = cfg["B"] * cfg["H"], cfg["d"], cfg["dv"], cfg["T"]
    S = L * T * max(d, dv)
    return [({"chunk_size": C}, max(S, L * C * max(C, d, dv), L * d * dv)) for C in (cfg["small_chunk"], 8)]


BACKSTOP = {
    "dims": {"B": 1, "H": 1, "Tq": 8192, "Tk": 8192, "T": 8192, "dq": 8, "dk": 8, "d": 8, "dv": 8},
    "args": {"chunk_size": 64},
    "allowed": lambda cfg, args: cfg["T"] * cfg["dv"],
    "resident_kb": 64 * 1024,
    "held_kb": 96 * 1024,
}
"""A float32 call of 8192 positions in chunks of 64, measured from outside the worker (run/cgroup.py): the (T, T)
products take 256 MB, every position's own (d, dv) sum 2 MB per feature pair; a running state takes kilobytes."""


RELATIONS = (
    {"id": "newest_key", "change": "keys, values", "positions": lambda cfg: [cfg["T"] - 1],
     "rows": lambda cfg: torch.arange(cfg["T"]) == cfg["T"] - 1,
     "says": "causal: the last key and value reach the last position only; changing them changes the last row and no "
             "other"},
    {"id": "first_value", "change": "values", "positions": lambda cfg: [0],
     "rows": lambda cfg: torch.ones(cfg["T"], dtype=torch.bool),
     "says": "the first value is in every position's sums S_i (phi > 0 gives it a weight everywhere): changing it "
             "changes every row"},
)


PROBLEM = Problem(
    id="linear_attention",
    title="Causal linear attention",
    summary="Attention with the feature map elu + 1 in place of the softmax: chunked with a running state, and one "
            "token at a time.",
    symbol="causal_linear_attention",
    points={"shapes": 1, "parity_float64": 3, "parity_float32": 1, "oracle": 2, "companion": 2, "metamorphic": 1,
            "block_invariance": 1, "gradients": 1, "stability": 1, "side_effects": 1, "memory": 2, "value_errors": 1,
            "capabilities": 1, "cuda": 1, "cuda_half": 1},
    hints=(
        "phi(x) = elu(x) + 1 > 0. Query i reads S_i = sum over j <= i of phi(k_j) v_j^T (d, dv) and z_i = sum of "
        "phi(k_j) (d,): out_i = phi(q_i)^T S_i / (phi(q_i)^T z_i). No epsilon: the term j = i keeps it positive.",
        "Chunked: carry S and z from chunk to chunk. Inside a chunk of n positions, the earlier chunks give phi(q_c) @ S "
        "and phi(q_c) @ z; the chunk's own keys give the (n, n) products phi(q_c) phi(k_c)^T, lower triangular.",
        "a = tril(phi(q_c) @ phi(k_c)^T); out_c = (phi(q_c) @ S + a @ v_c) / (phi(q_c) @ z + a.sum(-1)); then S += "
        "phi(k_c)^T v_c and z += phi(k_c).sum(-2) (as new tensors). The step: add the token to (S, z) first, then read.",
    ),
    methods=(
        Method(
            signature="def linear_attention_step(q_t, k_t, v_t, state=None):",
            statement=(
                "One token of the recurrent form. state None means zeros; else (S, z), the sums over earlier tokens.\n"
                "Adds the new token first (S + phi(k_t) v_t^T, z + phi(k_t)), then out_t = phi(q_t)^T S /\n"
                "(phi(q_t)^T z) from the new sums; returns (out_t, (S, z)), the given state never modified."
            ),
            args=(Arg("q_t", "(B, H, d)", "query"), Arg("k_t", "(B, H, d)", "key"), Arg("v_t", "(B, H, dv)", "value"),
                  Arg("state", "None, or the pair of sums over earlier tokens: of phi(k) v^T (B, H, d, dv), of phi(k) "
                               "(B, H, d)", "cache")),
            returns=(Out("out_t", "(B, H, dv)", "values"), Out("S", "(B, H, d, dv)", "cache"),
                     Out("z", "(B, H, d)", "cache")),
        ),
        Method(
            signature="def causal_linear_attention(queries, keys, values, chunk_size=None):",
            statement=(
                "phi(x) = elu(x) + 1 (alpha = 1). out_i = phi(q_i)^T S_i / (phi(q_i)^T z_i), S_i = sum over j <= i of\n"
                "phi(k_j) v_j^T, z_i = sum over j <= i of phi(k_j); no epsilon in the denominator. chunk_size None:\n"
                "any form. chunk_size an int >= 1 (else ValueError): chunks of chunk_size positions, the last maybe\n"
                "partial, a running (S, z) carried across them; no tensor an operation allocates has more than\n"
                "max(S, L*C*max(C, d, dv), L*d*dv) elements (C = chunk_size, L = B*H, S the largest input or\n"
                "output). Stepping linear_attention_step over t = 0..T-1 from None gives the same outputs."
            ),
            args=(Arg("queries", "(B, H, T, d): features in [-8, 1e4]", "query"),
                  Arg("keys", "(B, H, T, d): features in [-8, 1e4]", "key"),
                  Arg("values", "(B, H, T, dv)", "value"),
                  Arg("chunk_size", "None, or positions per chunk (>= 1)", "scalar")),
            returns=(Out("output", "(B, H, T, dv)", "values"),),
        ),
    ),
    variants=({"chunk_size": None}, {"chunk_size": 3}, {"chunk_size": 1}),
    fit=_fit,
    inputs=_inputs,
    trailing=lambda cfg: [] if cfg["chunk_size"] is None else [cfg["chunk_size"]],
    traced=False,  # the learner chooses its chunks: its tensors are no stages of the reference's
    options={  # each check's options (the check units in judge/checks/ declare them)
        "memory": {
            "calls": _memory,
            "fit": _memory_fit,
            "backstop": BACKSTOP,
            "words": {"bound": "max(S, L*C*max(C, d, dv), L*d*dv)",
                      "tensor": "the (T, T) products, or every position's own sum S_i",
                      "advice": "Carry S (d, dv) and z (d,) across chunks and use the parallel form inside each chunk "
                                "only: phi(q_c) @ S for the earlier chunks, the masked (C, C) products for its own keys"},
        },
        "metamorphic": {"relations": RELATIONS},
        "parity_float64": {"blocks": lambda cfg: tuple({"chunk_size": c} for c in (1, 2, 3, 5))},
        "stability": {"amplify": _amplify},
        "gradients": {"long": {"Tq": 131}, "long_args": {"chunk_size": 8}},  # a state detached every 64 positions
        "value_errors": {"calls": lambda cfg: tuple(({"chunk_size": c}, f"chunk_size = {c!r}", ())
                                                    for c in (0, -2, True, 2.5, 3.0))},
        "oracle": {"call": _oracle},
        "companion": {"calls": _companions},
        "cuda_half": {"within": _half},
    },
    mistakes=MISTAKES,
    banned=LLM_BANNED,
    track="serving",
    after=("flash_attention",),
)
