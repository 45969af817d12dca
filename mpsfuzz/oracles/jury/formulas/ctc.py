"""CTC loss by the forward (alpha) recursion of Graves et al. (2006), as the nn.CTCLoss
docs cite it, in log space.

The catalogue's call takes log_softmax of its first input over the classes (written out
here, ``elementary.log_softmax``) and ``blank`` (default 0). For a target l of length S the extended
label sequence l' = (blank, l1, blank, l2, ..., lS, blank) has 2S + 1 states; with y_t
the log-probabilities at time t:

    alpha_0(0) = y_0(blank), alpha_0(1) = y_0(l1), other states -inf;
    alpha_t(s) = y_t(l'_s) + logsumexp(alpha_{t-1}(s), alpha_{t-1}(s-1), alpha_{t-1}(s-2)),
                 the s-2 term only where l'_s is not blank and differs from l'_{s-2};
    loss = -logsumexp(alpha_{L-1}(2S), alpha_{L-1}(2S-1)), L the sample's input length

(an input length of 0 gives 0 for an empty target, else inf). ``zero_infinity`` turns
infinite losses (and their gradients) into 0; 'mean' divides each loss by its target
length (at least 1) and averages over the batch. Without zero_infinity the gradient of
an infinite loss is undefined: the reference does not apply to such a call when asked
for gradients.

Logs of sums that may be 0 (unreachable states) take log(1) and are then set to -inf,
so that autograd sees no infinite slope times a zero weight: gradients stay finite.
Selections are ``masked_fill`` (eager's call runs ``where`` for zero_infinity).
"""
from __future__ import annotations

import math

import torch

from ..references import NotApplicable, Reference
from .arguments import real_inputs
from .elementary import finite_or_zero, log_softmax

def log_of_sum(total: torch.Tensor) -> torch.Tensor:
    """log(total) of a total >= 0, -inf (with a zero gradient) where it is 0."""
    empty = ~torch.gt(total, 0)
    return torch.log(total.masked_fill(empty, 1.0)).masked_fill(empty, -math.inf)


def log_sum_exp(terms: list[torch.Tensor]) -> torch.Tensor:
    """log(sum(exp(term))) elementwise over same-shaped tensors, shifted by their max;
    a sum of 0 gives -inf with a zero gradient."""
    with torch.no_grad():
        top = terms[0]
        for t in terms[1:]:
            top = torch.maximum(top, t)
        top = finite_or_zero(top)
    total = sum(torch.exp(t - top) for t in terms)
    return top + log_of_sum(total)


def sample_targets(targets: torch.Tensor, lengths: list[int], batched: bool) -> list[list[int]]:
    if not batched:
        return [targets.reshape(-1).tolist()[:lengths[0]]]
    if targets.dim() == 2:
        return [targets[b].tolist()[:n] for b, n in enumerate(lengths)]
    flat, out, at = targets.reshape(-1).tolist(), [], 0
    for n in lengths:
        out.append(flat[at:at + n])
        at += n
    return out


def sample_loss(log_probs: torch.Tensor, labels: list[int], length: int, blank: int = 0) -> torch.Tensor:
    """-log p(labels | the first ``length`` steps of log_probs (T, C)), ``blank`` the
    blank class."""
    if length == 0:
        # reads no step: a constant, kept on the graph (an empty sum) so that its
        # gradient is 0 rather than absent
        return log_probs[:0].sum() + (0.0 if not labels else math.inf)
    extended = [blank]
    for c in labels:
        extended += [c, blank]
    states = len(extended)
    index = torch.tensor(extended, dtype=torch.int64)
    skip = torch.tensor([s >= 2 and extended[s] != blank and extended[s] != extended[s - 2]
                         for s in range(states)], dtype=torch.bool)
    padding = torch.full((2,), -math.inf, dtype=log_probs.dtype)
    emissions = log_probs.index_select(1, index)                     # (T, states)
    start = torch.tensor([s < 2 for s in range(states)], dtype=torch.bool)
    alpha = emissions[0].masked_fill(~start, -math.inf)
    for t in range(1, length):
        shifted = torch.cat([padding, alpha])
        one_back, two_back = shifted[1:states + 1], shifted[:states].masked_fill(~skip, -math.inf)
        alpha = emissions[t] + log_sum_exp([alpha, one_back, two_back])
    ends = alpha[-2:] if states > 1 else alpha
    return -log_sum_exp([ends[i:i + 1] for i in range(ends.shape[0])]).reshape(())


def ctc_loss(inputs, kwargs):
    real_inputs(inputs, 0)
    raw, targets = inputs[0], inputs[1]
    if raw.dim() not in (2, 3) or targets.is_floating_point():
        raise NotApplicable("ctc_loss takes (T, N, C) or (T, C) and integer targets")
    batched = raw.dim() == 3
    log_probs = log_softmax(raw, -1)
    if not batched:
        log_probs = log_probs.unsqueeze(1)
    input_lengths = [int(n) for n in kwargs["input_lengths"]]
    target_lengths = [int(n) for n in kwargs["target_lengths"]]
    if len(input_lengths) != log_probs.shape[1] or len(target_lengths) != log_probs.shape[1]:
        raise NotApplicable("one length per sample")
    if any(n > log_probs.shape[0] for n in input_lengths):
        raise NotApplicable("an input length past T")
    labels = sample_targets(targets, target_lengths, batched)
    zero_infinity = bool(kwargs.get("zero_infinity", False))
    blank = int(kwargs.get("blank", 0)) % log_probs.shape[-1]
    if any(c == blank for sample in labels for c in sample):
        raise NotApplicable("a target holds the blank class (undefined)")
    losses = torch.stack([sample_loss(log_probs[:, b], labels[b], input_lengths[b], blank)
                          for b in range(log_probs.shape[1])])
    if not zero_infinity and raw.requires_grad and bool(torch.isinf(losses).any()):
        # p = 0: the gradient of -log p is undefined there (eager CPU's backward gives
        # NaN by its formula, this recursion would give 0): no answer to vote with
        raise NotApplicable("the gradient of an infinite loss (an impossible alignment)")
    if zero_infinity:
        losses = losses.masked_fill(torch.isinf(losses), 0.0)
    reduction = kwargs.get("reduction", "mean")
    if reduction == "none":
        return losses if batched else losses.reshape(())
    if reduction == "sum":
        return losses.sum()
    if reduction == "mean":
        per_label = losses / torch.tensor([max(n, 1) for n in target_lengths], dtype=losses.dtype)
        return per_label.sum() / len(target_lengths)
    raise NotApplicable(f"reduction={reduction!r}")


FORMULAS: dict[str, Reference] = {"ctc_loss": ctc_loss}
