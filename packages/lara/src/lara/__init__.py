"""Kernelized attention against softmax/FlashAttention, fairly: one interface for softmax, Performer,
RFA, cosFormer, elu+1 linear attention, Nystromformer, LARA and LARA++; an efficiency harness; and a
unified distillation protocol that swaps the attention of a trained transformer."""

from lara.attention import (
    METHODS,
    Attention,
    KernelizedAttention,
    check_qkv,
    make_attention,
    register,
    segment_means,
)
from lara.baselines import (
    RFA,
    CosFormer,
    EluLinear,
    KVCache,
    Nystromformer,
    Performer,
    SoftmaxAttention,
)
from lara.linear import LinearState, linear_attention
from lara.randomized import LARA, LARAPlusPlus

__all__ = [
    "LARA",
    "METHODS",
    "RFA",
    "Attention",
    "CosFormer",
    "EluLinear",
    "KVCache",
    "KernelizedAttention",
    "LARAPlusPlus",
    "LinearState",
    "Nystromformer",
    "Performer",
    "SoftmaxAttention",
    "check_qkv",
    "linear_attention",
    "make_attention",
    "register",
    "segment_means",
]
