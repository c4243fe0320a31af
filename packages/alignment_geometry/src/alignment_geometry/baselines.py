"""Predictors of safety loss the paper's Fisher account is compared with.

Each maps one fine-tuning task (before, or for ``update_norm`` after, training) to a score whose
rank across tasks should follow the measured loss of alignment:

* :func:`gradient_cosine` - |cos| of the task gradient with the gradient of the refusal NLL on
  harmful prompts (first-order overlap of the task with "unlearning refusal");
* :func:`update_norm` - how far fine-tuning moved the weights, ``|delta theta|``;
* :func:`hidden_similarity` - cosine of the mean last-layer state of task prompts and of harmful
  prompts (representation overlap).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from alignment_geometry.fisher import FlatParams, PromptBatch, response_logits

__all__ = ["gradient_cosine", "hidden_similarity", "refusal_nll", "update_norm"]


def refusal_nll(
    space: FlatParams, harmful: PromptBatch, refuse_id: int
) -> Callable[[torch.Tensor], torch.Tensor]:
    """``theta -> mean_x -log p_theta(REFUSE | x)`` on harmful prompts."""
    logits = response_logits(space, harmful)

    def fn(theta: torch.Tensor) -> torch.Tensor:
        return -torch.log_softmax(logits(theta), -1)[:, refuse_id].mean()

    return fn


def gradient_cosine(g_task: torch.Tensor, g_refusal: torch.Tensor) -> float:
    """``|cos(g_task, g_refusal)|``."""
    denom = torch.linalg.norm(g_task) * torch.linalg.norm(g_refusal)
    if denom == 0:
        raise ValueError("a zero gradient has no direction")
    return float(torch.abs(g_task @ g_refusal) / denom)


def update_norm(delta: torch.Tensor) -> float:
    return float(torch.linalg.norm(delta))


@torch.no_grad()
def _mean_state(model: torch.nn.Module, batch: PromptBatch) -> torch.Tensor:
    out = model(
        input_ids=batch.input_ids, attention_mask=batch.attention_mask, output_hidden_states=True
    )
    last = out.hidden_states[-1][torch.arange(len(batch)), batch.last]
    return last.mean(0)


def hidden_similarity(
    model: torch.nn.Module, task_prompts: PromptBatch, harmful: PromptBatch
) -> float:
    """Cosine of the mean final-layer state (at the last prompt token) of the two prompt sets."""
    a, b = _mean_state(model, task_prompts), _mean_state(model, harmful)
    return float(a @ b / (torch.linalg.norm(a) * torch.linalg.norm(b)))
