"""Spec: Luong's attentional decoder with input feeding, section 15 of the seq2seq stage."""
import torch

from ..model.roles import Arg, Out
from ..model.spec import SCORE_BOUND, Method, Mistake, Problem

CELL = "h, c = self.cell(torch.cat((y_t, o), dim=-1), (h, c))  # input feeding: [y_t ; o_{t-1}], embedding first"
ATTENTIONAL = "o = self.dropout(torch.tanh(self.W_c(torch.cat((h, ctx), dim=-1))))  # [h_t ; ctx_t], the state first"
SCORES = "scores = (keys @ h[:, :, None])[:, :, 0]  # (B, S): h_t . (W_a m_s)"
FILL = "filled = scores.masked_fill(~memory_mask, torch.finfo(scores.dtype).min)"

MISTAKES = (
    Mistake("context_first", "the attentional state computed from [ctx_t ; h_t] instead of [h_t ; ctx_t]",
            ((ATTENTIONAL, ATTENTIONAL.replace("(h, ctx)", "(ctx, h)")),),
            explain="o_t = tanh(W_c [h_t ; ctx_t]) with the decoder state first: W_c's first Hd columns multiply h_t and "
                    "its last M columns ctx_t. The other order still has the right shape when the weights are random, "
                    "so only the values (and a model loaded from a checkpoint) tell it.",
            hint="torch.cat((h_t, ctx_t), dim=-1), then W_c and tanh."),
    Mistake("input_order", "the LSTM fed [o_{t-1} ; y_t] instead of [y_t ; o_{t-1}]",
            ((CELL, CELL.replace("(y_t, o)", "(o, y_t)")),),
            explain="The cell's input is the embedding first, then the previous attentional state: the first E columns "
                    "of cell.weight_ih multiply y_t and the last Hd columns o_{t-1}.",
            hint="self.cell(torch.cat((y_t, o_prev), dim=-1), (h, c))."),
    Mistake("no_input_feeding", "input feeding missing: zeros fed instead of o_{t-1}",
            ((CELL, CELL.replace("(y_t, o)", "(y_t, torch.zeros_like(o))")),),
            explain="Input feeding (Luong et al., section 3.3) gives each step the previous attentional state o_{t-1}, "
                    "so that the model knows what it attended before. Feeding zeros keeps the shapes and drops that "
                    "information: the state's o and the outputs of earlier steps no longer matter.",
            hint="Keep o_t in the state and concatenate it to the next step's embedding."),
    Mistake("feeds_hidden", "h_{t-1} fed to the LSTM instead of the attentional state o_{t-1}",
            ((CELL, CELL.replace("(y_t, o)", "(y_t, h)")),),
            explain="What is fed forward is the attentional state o_{t-1} = tanh(W_c [h_{t-1} ; ctx_{t-1}]), which "
                    "carries the context; the LSTM's own h_{t-1} already reaches the cell as its hidden state.",
            hint="torch.cat((y_t, o_prev), dim=-1), o_prev the third part of the state."),
    Mistake("feeds_undropped", "the dropped o_t returned, but the undropped one fed to the next step",
            ((ATTENTIONAL, "raw = torch.tanh(self.W_c(torch.cat((h, ctx), dim=-1)))\n        o = self.dropout(raw)"),
             ("        return o, weights, (h, c, o)", "        return o, weights, (h, c, raw)")),
            explain="The contract feeds the next step the o_t it returns, dropout included (as CS224n feeds o_prev): "
                    "keeping an undropped copy for the state makes training see another model than the one that "
                    "produced the outputs.",
            hint="o_t = dropout(tanh(W_c [h_t ; ctx_t])); return it and put that same tensor in the state."),
    Mistake("wa_on_state", "W_a applied to the decoder state instead of the memory",
            (("self.W_a = nn.Linear(memory_dim, hidden_dim, bias=False)",
              "self.W_a = nn.Linear(hidden_dim, memory_dim, bias=False)"),
             ("keys = self.W_a(memory)  # (B, S, Hd): W_a m_s", "keys = memory"),
             (SCORES, "scores = (keys @ self.W_a(h)[:, :, None])[:, :, 0]")),
            explain="The general score is h_t . (W_a m_s), W_a = nn.Linear(M, Hd) on the memory: W_a m_s can then be "
                    "computed once per sequence. Applied to the state, W_a has the transposed shape (M, Hd) and "
                    "gives another score whenever its weights are not transposed too.",
            hint="keys = self.W_a(memory), (B, S, Hd); scores[b, s] = h_t[b] . keys[b, s]."),
    Mistake("query_previous_state", "the attention queried with h_{t-1} (Bahdanau's order) instead of the new h_t",
            ((CELL, "h_prev = h\n        " + CELL), (SCORES, "scores = (keys @ h_prev[:, :, None])[:, :, 0]")),
            explain="Luong's decoder runs the LSTM first and scores the memory with its new state h_t (eq. 5); "
                    "Bahdanau's scores with the previous state before the RNN step. With h_{t-1} the first step scores "
                    "with the initial state (zeros: uniform weights) and every step attends one state late.",
            hint="(h_t, c_t) = cell(...) first, then scores = h_t . (W_a m_s)."),
    Mistake("mask_ignored", "memory_mask ignored: padding tokens attended",
            (("        if memory_mask is None:\n            weights", "        if True:\n            weights"),),
            explain="memory_mask marks the real source tokens (True); the padded positions of a shorter sentence must "
                    "get weight 0, else the context mixes in the encoder's states of padding.",
            hint="Fill the scores where memory_mask is False with a very negative number, softmax, multiply by the mask."),
    Mistake("mask_inverted", "memory_mask taken as CS224n's enc_masks (True = padding)",
            ((FILL, "filled = scores.masked_fill(memory_mask, torch.finfo(scores.dtype).min)"),
             ("weights = torch.softmax(filled, dim=-1) * memory_mask", "weights = torch.softmax(filled, dim=-1) * ~memory_mask")),
            explain="Here True marks a real source token, the inverse of CS224n's enc_masks (True = padding).",
            hint="Mask where memory_mask is False: scores.masked_fill(~memory_mask, ...)."),
    Mistake("nan_empty_rows", "a row with no source token gives NaN (a -inf fill)",
            ((FILL, "filled = scores.masked_fill(~memory_mask, float(\"-inf\"))"),),
            explain="A batch row whose memory_mask is all False has every score -inf after a -inf fill, and its softmax "
                    "is NaN; the contract gives such a row weights 0 and ctx_t = 0 (then o_t = tanh(W_c [h_t ; 0])).",
            hint="Fill with torch.finfo(scores.dtype).min, then multiply the weights by the mask."),
    Mistake("no_tanh", "the attentional state without its tanh",
            ((ATTENTIONAL, "o = self.dropout(self.W_c(torch.cat((h, ctx), dim=-1)))"),),
            explain="o_t = tanh(W_c [h_t ; ctx_t]): without the tanh the attentional state is unbounded, and it is fed "
                    "back into the LSTM at every step.",
            hint="o_t = dropout(torch.tanh(W_c(cat(h_t, ctx_t))))."),
    Mistake("state_ignored", "forward ignores the given state: it always starts from zeros",
            (("        outputs, weights = [], []\n", "        outputs, weights, state = [], [], None\n"),),
            explain="forward continues from the state it is given: it is how a sequence is decoded in parts, and how "
                    "a call follows the last one. Only state=None means zeros.",
            hint="Pass the given state to the first step; h, c, o are zeros only when state is None."),
    Mistake("dropout_in_eval", "dropout on o_t active in eval() mode",
            ((ATTENTIONAL, "o = torch.nn.functional.dropout(torch.tanh(self.W_c(torch.cat((h, ctx), dim=-1))), "
                           "self.dropout.p, training=True)"),),
            explain="Dropout must do nothing in eval() mode.",
            hint="Use the nn.Dropout module, or F.dropout(x, p, training=self.training)."),
)

STATEMENT_STEP = (
    "One decoding step. state None means h, c, o all zeros (B, Hd). In order:\n"
    "  1. (h_t, c_t) = cell([y_t ; o_{t-1}], (h_{t-1}, c_{t-1}))  (embedding first)\n"
    "  2. scores[b, s] = h_t . (W_a memory_s); weights_t = softmax over the allowed s (memory_mask True), 0 elsewhere\n"
    "  3. ctx_t = weights_t @ memory, (B, M)\n"
    "  4. o_t = dropout(tanh(W_c [h_t ; ctx_t]))  (the state first)\n"
    "A row with no allowed source token has weights 0 and ctx_t = 0. Dropout acts on o_t in train() only; the dropped\n"
    "o_t is the one returned and the one in the new state (h_t, c_t, o_t)."
)
STATEMENT_FORWARD = (
    "Teacher forcing: exactly step applied to targets[:, 0], ..., targets[:, T-1] from `state` (W_a memory may be\n"
    "computed once). outputs (B, T, Hd) stacks the o_t, weights (B, T, S) the weights_t; the returned state is the one\n"
    "after the last step. So forward on a split of the targets, the second part started from the first part's state,\n"
    "equals forward on the whole."
)
STATE_DOC = "None, or (h, c, o), each (B, Hd): LSTM hidden state, cell state, previous attentional state"
RETURNS_STATE = (Out("h", "(B, Hd): the LSTM's hidden state h_t", "cache"), Out("c", "(B, Hd): its cell state c_t", "cache"),
                 Out("o", "(B, Hd): the attentional state o_t, fed to the next step", "cache"))


def _fit(cfg, variant):
    """E = dq, Hd = h, M = dk (or Hd: a memory as wide as the decoder), T = Tq target steps, S = Tk source tokens."""
    return {**cfg, **variant, "E": cfg["dq"], "Hd": cfg["h"], "M": cfg["h"] if variant["memory"] == "M=Hd" else cfg["dk"],
            "T": cfg["Tq"], "S": cfg["Tk"]}


def _ctor(c):
    return {"embed_dim": c["E"], "hidden_dim": c["Hd"], "memory_dim": c["M"], "dropout": c.get("dropout", 0.0)}


def _params(c):
    E, Hd, M = c["E"], c["Hd"], c["M"]
    return {"cell.weight_ih": (4 * Hd, E + Hd), "cell.weight_hh": (4 * Hd, Hd), "cell.bias_ih": (4 * Hd,),
            "cell.bias_hh": (4 * Hd,), "W_a.weight": (Hd, M), "W_c.weight": (Hd, Hd + M)}


def _inputs(cfg, gen):
    """targets (B, T, E) and memory (B, S, M), standard normal."""
    B = cfg["B"]
    return [torch.randn(B, cfg["Tq"], cfg["E"], generator=gen, dtype=torch.float64),
            torch.randn(B, cfg["Tk"], cfg["M"], generator=gen, dtype=torch.float64)]


def _amplify(args, state, cfg):
    """Scale W_a so that the largest sum over features of |W_a m_s| is 1e4: with |h_t| < 1, every |score| <= 1e4."""
    keys = args[1] @ state["W_a.weight"].T
    state["W_a.weight"].mul_(SCORE_BOUND / keys.abs().sum(-1).max())


def _unroll(call, fed=None):
    """torch.nn.LSTMCell driven step by step, the attention written here with einsum: [outputs, weights, h, c, o] of a
    float64 call in eval(); with `fed` (B, T, Hd), step t + 1 is fed fed[:, t] as o_t (and its outputs are the
    undropped o's)."""
    args, s = call["args"], call["state"]
    y, memory = args[0], args[1]
    mask = args[2] if len(args) > 2 else None
    state = args[3] if len(args) > 3 else None
    B, T, E = y.shape
    Hd = s["W_c.weight"].shape[0]
    cell = torch.nn.LSTMCell(E + Hd, Hd, dtype=y.dtype)
    cell.load_state_dict({k.removeprefix("cell."): v for k, v in s.items() if k.startswith("cell.")})
    h, c, o = state if state is not None else (y.new_zeros(B, Hd),) * 3
    allowed = torch.ones(B, memory.shape[1], dtype=torch.bool) if mask is None else mask
    outs, weights = [], []
    with torch.no_grad():
        for t in range(T):
            h, c = cell(torch.cat([y[:, t], o], 1), (h, c))
            scores = torch.einsum("bh,hm,bsm->bs", h, s["W_a.weight"], memory)
            best = scores.masked_fill(~allowed, -torch.inf).amax(-1, keepdim=True).nan_to_num(0.0, neginf=0.0)
            e = torch.exp(scores - best) * allowed
            w = e / e.sum(-1, keepdim=True).clamp_min(torch.finfo(e.dtype).tiny)
            ctx = torch.einsum("bs,bsm->bm", w, memory)
            o_raw = torch.tanh(torch.einsum("hk,bk->bh", s["W_c.weight"], torch.cat([h, ctx], 1)))
            outs.append(o_raw)
            weights.append(w)
            o = o_raw if fed is None else fed[:, t]
    return [torch.stack(outs, 1), torch.stack(weights, 1), h, c, o]


def _oracle(call):
    """torch.nn.LSTMCell driven step by step, with the attention written independently (einsum)"""
    return _unroll(call)


def _replay(call, outputs):
    """The undropped o_t, the weights and the final state (h, c, o) when each step is fed the o_{t-1} that came back
    (dropout included)."""
    got = _unroll(call, fed=outputs[0])
    return got[0], got[1], got[2:]


PROBLEM = Problem(
    id="attentional_decoder",
    title="An attentional decoder with input feeding",
    summary="Luong's decoder: an LSTM cell fed [y_t ; o_{t-1}], general attention, o_t = tanh(W_c [h_t ; ctx_t]) fed forward.",
    symbol="AttentionalDecoder",
    points={"parameters": 2, "shapes": 1, "weight_sums": 1, "parity_float64": 3, "parity_float32": 1, "oracle": 2,
            "steps": 2, "kv_cache": 2, "metamorphic": 3, "gradients": 2, "masking": 1, "stability": 1,
            "side_effects": 1, "reuse": 1, "recurrent_dropout": 2, "cuda": 1, "cuda_half": 1},
    hints=(
        "Keep the state as (h, c, o): the LSTM's two states and the last attentional state. Each step feeds "
        "torch.cat((y_t, o_prev), dim=-1) to nn.LSTMCell(E + Hd, Hd); state=None means three zero tensors (B, Hd).",
        "Score with the new h_t: keys = W_a(memory) is (B, S, Hd), scores = (keys @ h_t[:, :, None])[:, :, 0]; fill "
        "the scores where memory_mask is False with a very negative number, softmax, multiply by the mask; "
        "ctx_t = weights @ memory.",
        "o_t = dropout(tanh(W_c(torch.cat((h_t, ctx_t), dim=-1)))); return o_t, the weights and (h_t, c_t, o_t). "
        "forward loops over t calling the same step and stacks o_t and weights_t along dim 1.",
    ),
    class_doc="Luong's attentional decoder (input feeding, general score), one step or teacher-forced over T steps.",
    methods=(
        Method(
            signature="def __init__(self, embed_dim, hidden_dim, memory_dim, dropout=0.0):",
            statement=(
                "E = embed_dim, Hd = hidden_dim, M = memory_dim. Exactly these parameters:\n"
                "cell = nn.LSTMCell(E + Hd, Hd) (with its biases), W_a = nn.Linear(M, Hd, bias=False),\n"
                "W_c = nn.Linear(Hd + M, Hd, bias=False); and a dropout of probability `dropout` on o_t."
            ),
            args=(("embed_dim", "E"), ("hidden_dim", "Hd"), ("memory_dim", "M"), ("dropout", "probability, 0.0 by default")),
        ),
        Method(
            signature="def step(self, y_t, memory, memory_mask=None, state=None):",
            statement=STATEMENT_STEP,
            args=(Arg("y_t", "(B, E): the current target token's embedding", "tensor"),
                  Arg("memory", "(B, S, M): the encoder's hidden states", "key"),
                  Arg("memory_mask", "None, or bool (B, S); True = a real source token", "key_padding"),
                  Arg("state", STATE_DOC, "cache")),
            returns=(Out("o_t", "(B, Hd): the attentional state", "values"), Out("weights_t", "(B, S)", "weights"))
            + RETURNS_STATE,
        ),
        Method(
            signature="def forward(self, targets, memory, memory_mask=None, state=None):",
            statement=STATEMENT_FORWARD,
            args=(Arg("targets", "(B, T, E): the target tokens' embeddings, T >= 1", "tensor"),
                  Arg("memory", "(B, S, M): the encoder's hidden states", "key"),
                  Arg("memory_mask", "None, or bool (B, S); True = a real source token", "key_padding"),
                  Arg("state", STATE_DOC, "cache")),
            returns=(Out("outputs", "(B, T, Hd): the o_t, stacked", "values"),
                     Out("weights", "(B, T, S): the weights_t, stacked", "weights")) + RETURNS_STATE,
        ),
    ),
    imports="import torch\nfrom torch import nn\n",
    ctor=_ctor,
    ctor_required=3,
    variants=({"memory": "M!=Hd"}, {"memory": "M=Hd"}),
    fit=_fit,
    params=_params,
    inputs=_inputs,
    options={  # each check's options (the check units in judge/checks/ declare them)
        "stability": {"amplify": _amplify},
        "oracle": {"call": _oracle},
        "recurrent_dropout": {"replay": _replay, "stepped": "step"},
        "gradients": {"long": {"Tq": 37}},
        "reuse": {"stepped": "step"},  # the three calls through step() too: a memory projection kept by step fails  # past 32 steps: a state detached every 16 or 32 (truncated BPTT) fails
        "kv_cache": {"fit": lambda cfg, T: {**cfg, "T": T, "Tq": T},
                     "rule": "forward continues from the state it is given: the second part of the targets, started "
                             "from the state the first part returned, goes on exactly where one call would be"},
        "metamorphic": {"relations": (
            {"id": "feeds_o", "change": "state[2]", "same": False,
             "says": "input feeding: the state's o (the previous attentional state o_{t-1}) is part of the first step's "
                     "LSTM input [y_t ; o_{t-1}], so changing it must change the result"},
            {"id": "o_columns", "change": "state[2]", "zero": lambda c: {"cell.weight_ih": (c["E"], c["E"] + c["Hd"])},
             "says": "the LSTM input is [y_t ; o_{t-1}], embedding first: with the last Hd columns of cell.weight_ih "
                     "set to 0, o_{t-1} cannot reach the result"},
            {"id": "y_columns", "change": "targets", "zero": lambda c: {"cell.weight_ih": (0, c["E"])},
             "says": "the LSTM input is [y_t ; o_{t-1}], embedding first: with the first E columns of cell.weight_ih "
                     "set to 0, the targets cannot reach the result"},
            {"id": "ctx_columns", "change": "memory", "zero": lambda c: {"W_c.weight": (c["Hd"], c["Hd"] + c["M"])},
             "compared": ("outputs", "h", "c", "o"),
             "says": "o_t = tanh(W_c [h_t ; ctx_t]), the state first: with the last M columns of W_c set to 0, the "
                     "memory reaches only the weights, never o_t or the state"},
        )},
    },
    mistakes=MISTAKES,
    track="seq2seq",
    after=("local_attention",),
)
