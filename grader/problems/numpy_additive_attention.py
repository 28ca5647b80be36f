"""Spec: one Bahdanau decoder step in NumPy (the warm-up)."""
import torch

from ..model.roles import Arg, Out
from ..model.spec import SCORE_BOUND, Method, Mistake, Problem

STABLE = "e = e - e.max()  # exp of the largest score is 1: no overflow"
MISTAKES = (
    Mistake("no_max_subtraction", "softmax without subtracting the maximum (overflows)", ((STABLE, "e = e"),),
            explain="np.exp(e) overflows to inf once e_j passes ~88 (float32) or ~709 (float64), and inf / inf is NaN.",
            hint="Subtract e.max() before np.exp: softmax(e) = softmax(e - c) for any constant c."),
    Mistake("imports_torch", "the module imports torch",
            (("import numpy as np", "import numpy as np\nimport torch  # noqa: F401"),),
            explain="This step is the NumPy warm-up: the module may not import torch, not even unused (an interviewer's "
                    "machine may not have it).",
            hint="Delete every `import torch` and use NumPy only: np.tanh, np.exp, @."),
    Mistake("no_tanh", "tanh missing", (("np.tanh(W_a @ s_prev + h @ U_a.T)", "(W_a @ s_prev + h @ U_a.T)"),),
            explain="Without tanh, v_a . (W_a s + U_a h_j) splits into a term that is the same for every j and a "
                    "linear one: the decoder state no longer changes which encoder step wins.",
            hint="e_j = v_a . tanh(W_a s_prev + U_a h_j)."),
    Mistake("not_normalised", "exp(e) used as the weights without dividing by its sum",
            (("alpha = weights / weights.sum()", "alpha = weights"),),
            explain="alpha must be a probability distribution over the T encoder steps: exp(e) / sum(exp(e)).",
            hint="alpha = np.exp(e) / np.exp(e).sum()."),
    Mistake("sum_instead_of_v_a", "features summed instead of scored with v_a", (("e = features @ v_a", "e = features.sum(1)"),),
            explain="v_a weighs the d features of tanh(...) into one score; summing them treats every feature alike.",
            hint="e = np.tanh(...) @ v_a, shape (T,)."),
    Mistake("context_not_summed", "context left as the weighted encoder states (T, n_h), not summed over T",
            (("return alpha @ h, alpha", "return alpha[:, None] * h, alpha"),),
            explain="The context is one vector: the alpha-weighted sum of the T encoder states, shape (n_h,).",
            hint="context = alpha @ h (or (alpha[:, None] * h).sum(0))."),
    Mistake("fixed_float64", "float32 inputs computed and returned in float64",
            (("weights = np.exp(e)", "weights = np.exp(e.astype(np.float64))"),),
            explain="The outputs must keep the inputs' dtype; a cast to float64 (or a float64 constant array) "
                    "promotes everything after it.",
            hint="Do not cast: NumPy keeps float32 when every operand is float32."),
    Mistake("unweighted_context", "context is the plain mean of the encoder states", (("return alpha @ h, alpha", "return h.mean(0), alpha"),),
            explain="The context must weigh each encoder state h_j by its attention weight alpha_j.",
            hint="context = alpha @ h."),
)


def _inputs(cfg, gen):
    """s_prev (n_s,), h (T, n_h) standard normal; W_a (d, n_s), U_a (d, n_h), v_a (d,) in nn.Linear's range."""
    T, n_s, n_h, d = cfg["T"], cfg["n_s"], cfg["n_h"], cfg["d"]

    def linear(*shape):
        return (torch.rand(*shape, generator=gen, dtype=torch.float64) * 2 - 1) / shape[-1] ** 0.5

    return [torch.randn(n_s, generator=gen, dtype=torch.float64), torch.randn(T, n_h, generator=gen, dtype=torch.float64),
            linear(d, n_s), linear(d, n_h), linear(d)]


def _amplify(args, state, cfg):
    """|e_j| <= sum |v_a| because |tanh| < 1: scale v_a so that bound is exactly 1e4."""
    args[4].mul_(SCORE_BOUND / args[4].abs().sum())


ZH = {
    "title": "用 NumPy 实现加性注意力",
    "summary": "只用 NumPy 完成 Bahdanau 解码器的一步：打分、数值稳定的 softmax、上下文向量。",
    "hints": (
        "一次给全部 T 个编码器步打分：W_a @ s_prev 是 (d,)，h @ U_a.T 是 (T, d)；两者相加广播成 (T, d)。"
        "再取 tanh，然后 @ v_a 得到 e，形状 (T,)。",
        "稳定的 softmax 先减去最大值：np.exp(e - e.max()) 不会溢出，结果也不变。上下文是 h 各行按 alpha 的加权和。",
        "几乎就是答案了：e = np.tanh(W_a @ s_prev + h @ U_a.T) @ v_a；w = np.exp(e - e.max())；alpha = w / w.sum()；"
        "return alpha @ h, alpha",
    ),
    "statements": (
        "Bahdanau 注意力的一个解码步，只用 NumPy（模块不能导入 torch）：\n"
        "对每个编码器步 j，e_j = v_a . tanh(W_a s_prev + U_a h_j)；\n"
        "alpha = softmax(e)，|e_j| 达到 1e4 时仍然有限；context = alpha @ h。\n"
        "两者都以 NumPy 数组返回，dtype 与输入相同（float32 或 float64）；不修改输入。",
    ),
    "mistakes": {
        "no_max_subtraction": ("softmax 没有减去最大值（溢出）",
                               "e_j 超过约 88（float32）或约 709（float64）时 np.exp(e) 溢出为 inf，而 inf / inf 是 NaN。",
                               "np.exp 之前减去 e.max()：对任意常数 c，softmax(e) = softmax(e - c)。"),
        "imports_torch": ("模块导入了 torch",
                          "这一题是 NumPy 热身：模块不能导入 torch，即使没用到也不行（面试官的机器上可能没有它）。",
                          "删掉所有 `import torch`，只用 NumPy：np.tanh、np.exp、@。"),
        "no_tanh": ("缺少 tanh",
                    "没有 tanh 时，v_a . (W_a s + U_a h_j) 拆成一个对所有 j 都相同的项和一个线性项：解码器状态不再影响哪个编码器步胜出。",
                    "写成：e_j = v_a . tanh(W_a s_prev + U_a h_j)。"),
        "not_normalised": ("把 exp(e) 直接当作权重，没有除以它的和",
                           "alpha 必须是 T 个编码器步上的概率分布：exp(e) / sum(exp(e))。",
                           "写成：alpha = np.exp(e) / np.exp(e).sum()。"),
        "sum_instead_of_v_a": ("对特征直接求和，而不是用 v_a 打分",
                               "v_a 把 tanh(...) 的 d 个特征加权成一个分数；直接求和等于把每个特征一视同仁。",
                               "e = np.tanh(...) @ v_a，形状 (T,)。"),
        "context_not_summed": ("上下文停留在加权后的编码器状态 (T, n_h)，没有在 T 上求和",
                               "上下文是一个向量：T 个编码器状态按 alpha 的加权和，形状 (n_h,)。",
                               "context = alpha @ h（或 (alpha[:, None] * h).sum(0)）。"),
        "fixed_float64": ("float32 输入被按 float64 计算并返回",
                          "输出必须保持输入的 dtype；转换成 float64（或使用 float64 的常数数组）会把之后的一切都提升为 float64。",
                          "不要做类型转换：所有操作数都是 float32 时，NumPy 会保持 float32。"),
        "unweighted_context": ("上下文是编码器状态的简单平均",
                               "上下文必须用每个编码器状态 h_j 的注意力权重 alpha_j 来加权。",
                               "写成：context = alpha @ h。"),
    },
}


PROBLEM = Problem(
    id="numpy_additive_attention",
    title="Additive attention in NumPy",
    summary="One Bahdanau decoder step with NumPy alone: scores, a stable softmax, the context vector.",
    symbol="additive_attention_step",
    points={"no_torch": 2, "shapes": 1, "weight_sums": 1, "parity_float64": 3, "parity_float32": 1,
            "stability": 1, "side_effects": 1},
    hints=(
        "Score all T encoder steps at once: W_a @ s_prev is (d,), h @ U_a.T is (T, d); their sum broadcasts "
        "to (T, d). tanh, then @ v_a gives e, shape (T,).",
        "A stable softmax subtracts the maximum first: np.exp(e - e.max()) never overflows, and the result is the "
        "same. The context is the alpha-weighted sum of the rows of h.",
        "e = np.tanh(W_a @ s_prev + h @ U_a.T) @ v_a; w = np.exp(e - e.max()); alpha = w / w.sum(); "
        "return alpha @ h, alpha",
    ),
    methods=(
        Method(
            signature="def additive_attention_step(s_prev, h, W_a, U_a, v_a):",
            statement=(
                "One decoder step of Bahdanau attention, in NumPy only (the module must not import torch):\n"
                "e_j = v_a . tanh(W_a s_prev + U_a h_j) for each encoder step j;\n"
                "alpha = softmax(e), finite for |e_j| up to 1e4; context = alpha @ h.\n"
                "Both come back as NumPy arrays of the inputs' dtype (float32 or float64); inputs are not modified."
            ),
            args=(Arg("s_prev", "(n_s,)", "query"), Arg("h", "(T, n_h)", "key"), Arg("W_a", "(d, n_s)", "parameter"),
                  Arg("U_a", "(d, n_h)", "parameter"), Arg("v_a", "(d,)", "parameter")),
            returns=(Out("context", "(n_h,)", "values"), Out("alpha", "(T,)", "weights")),
        ),
    ),
    imports="import numpy as np\n",
    fit=lambda cfg, variant: {**cfg, "T": cfg["Tk"], "n_s": cfg["dq"], "n_h": cfg["dv"], "d": cfg["h"]},
    inputs=_inputs,
    options={  # each check's options (the check units in judge/checks/ declare them)
        "stability": {"amplify": _amplify},
    },
    mistakes=MISTAKES,
    track="warm-up",
    zh=ZH,
)
