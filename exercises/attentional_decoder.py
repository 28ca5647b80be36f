"""An attentional decoder with input feeding: a stub for you to fill in.

Generated from grader/problems/attentional_decoder.py; grade it with `pytest -k attentional_decoder`.
"""

import torch
from torch import nn


class AttentionalDecoder(nn.Module):
    """Luong's attentional decoder (input feeding, general score), one step or teacher-forced over T steps."""

    def __init__(self, embed_dim, hidden_dim, memory_dim, dropout=0.0):
        """E = embed_dim, Hd = hidden_dim, M = memory_dim. Exactly these parameters:
        cell = nn.LSTMCell(E + Hd, Hd) (with its biases), W_a = nn.Linear(M, Hd, bias=False),
        W_c = nn.Linear(Hd + M, Hd, bias=False); and a dropout of probability `dropout` on o_t.

        Args:
            embed_dim: E
            hidden_dim: Hd
            memory_dim: M
            dropout: probability, 0.0 by default

        Dims:
            E: embedding size (= H * d)
            Hd: decoder hidden size
            M: memory (encoder state) size
        """
        raise NotImplementedError("AttentionalDecoder.__init__: not started")

    def step(self, y_t, memory, memory_mask=None, state=None):
        """One decoding step. state None means h, c, o all zeros (B, Hd). In order:
          1. (h_t, c_t) = cell([y_t ; o_{t-1}], (h_{t-1}, c_{t-1}))  (embedding first)
          2. scores[b, s] = h_t . (W_a memory_s); weights_t = softmax over the allowed s (memory_mask True), 0 elsewhere
          3. ctx_t = weights_t @ memory, (B, M)
          4. o_t = dropout(tanh(W_c [h_t ; ctx_t]))  (the state first)
        A row with no allowed source token has weights 0 and ctx_t = 0. Dropout acts on o_t in train() only; the dropped
        o_t is the one returned and the one in the new state (h_t, c_t, o_t).

        Args:
            y_t: (B, E): the current target token's embedding
            memory: (B, S, M): the encoder's hidden states
            memory_mask: None, or bool (B, S); True = a real source token
            state: None, or (h, c, o), each (B, Hd): LSTM hidden state, cell state, previous attentional state

        Returns:
            o_t: (B, Hd): the attentional state
            weights_t: (B, S)
            h: (B, Hd): the LSTM's hidden state h_t
            c: (B, Hd): its cell state c_t
            o: (B, Hd): the attentional state o_t, fed to the next step

        Dims:
            B: batch size
            h: attention hidden size
            E: embedding size (= H * d)
            S: key positions: cached and new (P + T), or the encoder memory's
            Hd: decoder hidden size
            M: memory (encoder state) size
        """
        raise NotImplementedError("AttentionalDecoder.step: not started")

    def forward(self, targets, memory, memory_mask=None, state=None):
        """Teacher forcing: exactly step applied to targets[:, 0], ..., targets[:, T-1] from `state` (W_a memory may be
        computed once). outputs (B, T, Hd) stacks the o_t, weights (B, T, S) the weights_t; the returned state is the one
        after the last step. So forward on a split of the targets, the second part started from the first part's state,
        equals forward on the whole.

        Args:
            targets: (B, T, E): the target tokens' embeddings, T >= 1
            memory: (B, S, M): the encoder's hidden states
            memory_mask: None, or bool (B, S); True = a real source token
            state: None, or (h, c, o), each (B, Hd): LSTM hidden state, cell state, previous attentional state

        Returns:
            outputs: (B, T, Hd): the o_t, stacked
            weights: (B, T, S): the weights_t, stacked
            h: (B, Hd): the LSTM's hidden state h_t
            c: (B, Hd): its cell state c_t
            o: (B, Hd): the attentional state o_t, fed to the next step

        Dims:
            B: batch size
            h: attention hidden size
            E: embedding size (= H * d)
            T: encoder steps, or positions (rows) of x
            S: key positions: cached and new (P + T), or the encoder memory's
            Hd: decoder hidden size
            M: memory (encoder state) size
        """
        raise NotImplementedError("AttentionalDecoder.forward: not started")
