"""STYLE: Dive into Deep Learning, MXNet edition (np-style softmax helper), ported to plain NumPy
BUG: The softmax exponentiates the raw scores without subtracting their maximum, so large scores overflow to inf and the weights become NaN.
STAGE: weights
WHEN: Scores e_j above about 88 in float32 (about 709 in float64), e.g. a v_a with large entries.
"""
import numpy as np


def softmax(X):
    X_exp = np.exp(X)
    partition = X_exp.sum(axis=-1, keepdims=True)
    return X_exp / partition  # The broadcast mechanism is applied here


def additive_attention_step(s_prev, h, W_a, U_a, v_a):
    # After projection: queries (d,), keys (T, d)
    queries = np.dot(W_a, s_prev)
    keys = np.dot(h, U_a.T)
    # Sum up with broadcasting: (1, d) + (T, d) -> (T, d)
    features = np.expand_dims(queries, axis=0) + keys
    features = np.tanh(features)
    # There is only one output of w_v, the score of each key: (T,)
    scores = np.dot(features, v_a)
    attention_weights = softmax(scores)
    context = np.dot(attention_weights, h)
    return context, attention_weights
