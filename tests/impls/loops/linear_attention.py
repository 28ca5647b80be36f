"""The recurrent form everywhere: causal_linear_attention steps linear_attention_step over the positions (a running
state of (d, dv) + (d,) per head is within every chunk size's bound)."""
import torch
import torch.nn.functional as F


def linear_attention_step(q_t, k_t, v_t, state=None):
    fk = F.elu(k_t) + 1
    if state is None:
        S = torch.einsum("bhd,bhe->bhde", fk, v_t)
        z = fk
    else:
        S = state[0] + torch.einsum("bhd,bhe->bhde", fk, v_t)
        z = state[1] + fk
    fq = F.elu(q_t) + 1
    return torch.einsum("bhd,bhde->bhe", fq, S) / torch.einsum("bhd,bhd->bh", fq, z)[..., None], (S, z)


def causal_linear_attention(queries, keys, values, chunk_size=None):
    if chunk_size is not None and (type(chunk_size) is not int or chunk_size <= 0):
        raise ValueError(f"chunk_size must be None or a positive int, not {chunk_size!r}")
    state, outs = None, []
    for t in range(queries.shape[2]):
        out, state = linear_attention_step(queries[:, :, t], keys[:, :, t], values[:, :, t], state)
        outs.append(out)
    return torch.stack(outs, dim=2)
