"""Spec: the backward pass of attention by hand: dQ, dK, dV, causal and not, with no automatic differentiation."""
import torch

from ..model.roles import Arg, Out
from ..model.spec import Method, Mistake, Problem
from ._common import LLM_BANNED, QKV, amplify_qk, lead_fit, lead_inputs

DELTA = "delta = (do * o).sum(-1, keepdim=True)  # rowsum(dO * O) = rowsum(P * dP)"
DS = "ds = p * (dp - delta)  # through the softmax: dS = P * (dP - delta)"
DQ = "dq = ds @ k * scale"
DK = "dk = ds.transpose(-2, -1) @ q * scale"
DV = "dv = p.transpose(-2, -1) @ do  # (..., Tk, dv)"
CAUSAL = "allowed = torch.ones(Tq, Tk, dtype=torch.bool, device=q.device).tril(Tk - Tq)"
NORM = "p = p / torch.where(total > 0, total, torch.ones_like(total))  # P; all zeros on a row with no allowed key"
RETURN = "return dq.to(queries.dtype), dk.to(keys.dtype), dv.to(values.dtype)"
AUTOGRAD = '''    with torch.enable_grad():
        leaves = [t.detach().requires_grad_() for t in (queries, keys, values)]
        mask = torch.ones(Tq, Tk, dtype=torch.bool).tril(Tk - Tq) if is_causal else None
        s = leaves[0] @ leaves[1].transpose(-2, -1) / d ** 0.5
        if mask is not None:
            s = s.masked_fill(~mask, torch.finfo(s.dtype).min)
        out = (torch.softmax(s, -1) * (mask if mask is not None else 1)) @ leaves[2]
        return tuple(torch.autograd.grad((out * grad_output).sum(), leaves))
'''

MISTAKES = (
    Mistake("no_delta", "the rowsum(dO * O) term missing: dS = P * dP",
            ((DS, "ds = p * dp"),),
            explain="The softmax's Jacobian is diag(P) - P P^T per row: dS = P * (dP - rowsum(P * dP)), and "
                    "rowsum(P * dP) = rowsum(dO * O). Without it every row of dS is off by P times that sum.",
            hint="delta = (dO * O).sum(-1, keepdim=True); dS = P * (dP - delta)."),
    Mistake("jacobian_transposed", "the softmax's correction summed over queries instead of keys (Jacobian transposed)",
            ((DELTA, "delta = (p * dp).sum(-2, keepdim=True)"),),
            explain="Each row of P is one softmax over the keys; its Jacobian mixes the entries of that row, so the "
                    "correction sums over the keys (the last axis), one number per query.",
            hint="delta has shape (..., Tq, 1): a sum over the last axis."),
    Mistake('delta_from_dp', 'D taken as rowsum(dP) instead of rowsum(dO * O) = rowsum(P * dP)',
            (('delta = (do * o).sum(-1, keepdim=True)', 'delta = dp.sum(-1, keepdim=True)'),),
            explain="The softmax's backward subtracts, per row, the weighted mean of dP under P: rowsum(P * dP), which equals rowsum(dO * O). The plain row sum of dP weighs every key alike.",
            hint='delta = (dO * O).sum(-1, keepdim=True) (or (P * dP).sum(-1, keepdim=True)); dS = P * (dP - delta).'),
    Mistake('softmax_no_max', 'the softmax recomputed without subtracting the row maximum (overflows)',
            (('m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))', 'm = torch.zeros_like(m)'),),
            explain='exp of a score of ~1e4 is inf, and inf / inf is NaN: the recomputed P must subtract the row maximum (or use the saved lse) before exp.',
            hint="p = exp(s - s.amax(-1, keepdim=True)), with a row of no allowed key kept at 0 (or exp(s - lse) with the forward's lse)."),
    Mistake("causal_missing", "the causal mask missing from the backward",
            ((CAUSAL, "allowed = torch.ones(Tq, Tk, dtype=torch.bool, device=q.device)"),),
            explain="The backward must recompute the same P as the forward: with is_causal, future keys get "
                    "probability 0 and no gradient.",
            hint="Mask the scores with j <= i + (Tk - Tq) before the softmax, exactly as in the forward."),
    Mistake("causal_top_left", "causal mask aligned to the top left",
            ((CAUSAL, "allowed = torch.ones(Tq, Tk, dtype=torch.bool, device=q.device).tril(0)"),),
            explain="Query i sees key j when j <= i + (Tk - Tq) (bottom right, as in flash_attention); tril(0) is the top-"
                    "left rule, the same only when Tq == Tk.",
            hint="torch.ones(Tq, Tk, dtype=torch.bool).tril(Tk - Tq)."),
    Mistake("dq_no_scale", "grad_queries missing the 1/sqrt(d) scale", ((DQ, "dq = ds @ k"),),
            explain="S = Q K^T / sqrt(d), so dQ = dS K / sqrt(d): the scale passes into both dQ and dK.",
            hint="dq = ds @ k / sqrt(d)."),
    Mistake("dk_from_keys", "grad_keys from the keys instead of the queries", ((DK, "dk = ds.transpose(-2, -1) @ k * scale"),),
            explain="S = Q K^T / sqrt(d): the gradient of S with respect to K is the queries, dK = dS^T Q / sqrt(d).",
            hint="dk = ds^T @ q / sqrt(d)."),
    Mistake("dv_not_transposed", "grad_values as P dO instead of P^T dO", ((DV, "dv = p @ do"),),
            explain="O = P V with P (Tq, Tk): dV = P^T dO, of the values' shape (Tk, dv).",
            hint="dv = p.transpose(-2, -1) @ do."),
    Mistake("empty_rows_nan", "rows with no allowed key give NaN gradients (0 / 0)",
            ((NORM, "p = p / total"),),
            explain="A query with no allowed key (causal with Tq > Tk) has P = 0 / 0: NaN spreads into every gradient; "
                    "such a row contributes nothing.",
            hint="Divide by the row sum only where it is positive."),
    Mistake("float32_grads", "gradients returned as float32",
            ((RETURN, "return dq.float(), dk.float(), dv.float()"),),
            explain="Each gradient has the dtype of its input: float64 inputs get float64 gradients.",
            hint="return dq.to(queries.dtype), dk.to(keys.dtype), dv.to(values.dtype)."),
    Mistake("uses_autograd", "calls torch.autograd.grad instead of computing the gradients",
            (("    scale = d ** -0.5\n", "    scale = d ** -0.5\n" + AUTOGRAD),),
            explain="The exercise is the backward pass by hand; automatic differentiation of any kind is switched off "
                    "while the grader calls it.",
            hint="dV = P^T dO; dP = dO V^T; dS = P * (dP - rowsum(dO * O)); dQ = dS K / sqrt(d); dK = dS^T Q / sqrt(d)."),
)


def _oracle(call):
    """autograd through F.scaled_dot_product_attention with the bottom-right causal mask"""
    q, k, v, do, causal = (list(call["args"]) + [False])[:5]  # is_causal may be left to its default
    Tq, Tk = q.shape[-2], k.shape[-2]
    mask = torch.ones(Tq, Tk, dtype=torch.bool).tril(Tk - Tq) if causal else torch.ones(Tq, Tk, dtype=torch.bool)
    empty = ~mask.any(-1)  # such rows contribute nothing: give them every key and no incoming gradient
    mask, do = mask | empty[:, None], do.masked_fill(empty[:, None], 0.0)
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    with torch.enable_grad():
        out = torch.nn.functional.scaled_dot_product_attention(*leaves, attn_mask=mask)
        return list(torch.autograd.grad((out * do).sum(), leaves))


PROBLEM = Problem(
    id="attention_backward",
    title="Attention backward",
    summary="The backward pass of attention by hand: dQ, dK, dV, causal or not, with no automatic differentiation.",
    symbol="attention_backward",
    points={"shapes": 1, "parity_float64": 3, "parity_float32": 1, "oracle": 3, "stability": 1, "side_effects": 1,
            "capabilities": 1, "cuda": 1, "cuda_half": 1},
    hints=(
        "Recompute the forward first: P = softmax(q k^T / sqrt(d)) (with the bottom-right causal mask when asked), "
        "O = P V. Then walk back through each step.",
        "dV = P^T dO; dP = dO V^T; through the softmax dS = P * (dP - rowsum(dO * O)); dQ = dS K / sqrt(d); "
        "dK = dS^T Q / sqrt(d).",
        "Rows with no allowed key have P = 0 (never divide by 0) and contribute nothing; return each gradient in its "
        "input's dtype. backward, torch.autograd.grad and torch.func are switched off during the call.",
    ),
    methods=(
        Method(
            signature="def attention_backward(queries, keys, values, grad_output, is_causal=False):",
            statement=(
                "With O = softmax(q k^T / sqrt(d)) v over the allowed keys (the causal rule of flash_attention), return the\n"
                "gradients of sum(O * grad_output) with respect to queries, keys and values, each of its input's\n"
                "shape, dtype and device. Rows with no allowed key contribute nothing. No automatic differentiation\n"
                "of any kind (Tensor.backward, torch.autograd.grad/backward, torch.autograd.functional, forward_ad,\n"
                "torch.func): the grader switches it off during the call. Never modifies its inputs; stable for\n"
                "scores up to 1e4 in float32."
            ),
            args=(Arg("queries", "(..., Tq, d)", "query"), Arg("keys", "(..., Tk, d)", "key"),
                  Arg("values", "(..., Tk, dv)", "value"), Arg("grad_output", "(..., Tq, dv)", "tensor"),
                  Arg("is_causal", "bool: key j allowed for query i when j <= i + (Tk - Tq)", "causal")),
            returns=(Out("grad_queries", "(..., Tq, d)", "gradient"), Out("grad_keys", "(..., Tk, d)", "gradient"),
                     Out("grad_values", "(..., Tk, dv)", "gradient")),
        ),
    ),
    variants=({"rank": 3}, {"rank": 4}, {"rank": 2}),
    fit=lead_fit,
    inputs=lambda cfg, gen: lead_inputs(cfg, gen, *QKV, ("Tq", "dv")),  # then grad_output (..., Tq, dv)
    options={  # each check's options (the check units in judge/checks/ declare them)
        "stability": {"amplify": amplify_qk, "long": True},  # key blocks under a stale maximum, query blocks of 128
        "oracle": {"call": _oracle},
    },
    mistakes=MISTAKES,
    banned=LLM_BANNED + ("_flash_attention_backward", "_efficient_attention_backward",
                     "_softmax_backward_data", "_make_dual"),
    track="LLM",
    after=("flash_attention",),
)
