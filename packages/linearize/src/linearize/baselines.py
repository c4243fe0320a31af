"""The post-hoc linearizations the paper compares against, as :class:`LinearizeConfig` s of the same
harness (same capture, same transfer budget, same evaluation). The softmax teacher itself is the
unconverted model.

- ``sliding_window``: exact attention over the last ``window`` tokens, nothing else;
- ``streaming_llm``: ``sinks`` first tokens + a window (Xiao et al. 2023), no state;
- ``elu_linear``: normalised linear attention with ``1 + elu`` features (Katharopoulos et al. 2020);
- ``hedgehog``: normalised linear attention with learned softmax features (Zhang et al. 2024);
- ``lolcats``: Hedgehog features + an exact sliding window (64 in the paper), shared denominator
  (Zhang et al. 2024, LoLCATs);
- ``liger_gla``: GLA-style diagonal gates pooled from the key, ``softmax`` features, a window, the two
  mixed 0.5 / 0.5, the state over every token (Lan et al. 2025);
- ``lola``: Hedgehog linear attention + sinks + window + a sparse cache that keeps the tokens the
  state recalls worst (self-recall error), shared denominator (McDermott et al. 2025, LoLA).
"""

from __future__ import annotations

from collections.abc import Callable

from linearize.student import LinearizeConfig

__all__ = [
    "BASELINES",
    "elu_linear",
    "hedgehog",
    "liger_gla",
    "lola",
    "lolcats",
    "sliding_window",
    "streaming_llm",
]


def sliding_window(window: int = 64) -> LinearizeConfig:
    return LinearizeConfig(update="none", budget=window, window=window)


def streaming_llm(sinks: int = 4, window: int = 60) -> LinearizeConfig:
    return LinearizeConfig(update="none", budget=sinks + window, sinks=sinks, window=window)


def elu_linear(feature_dim: int | None = None) -> LinearizeConfig:
    return LinearizeConfig(update="linear", feature_map="elu1")


def hedgehog(feature_dim: int | None = None) -> LinearizeConfig:
    return LinearizeConfig(update="linear", feature_map="hedgehog", feature_dim=feature_dim)


def lolcats(window: int = 64, feature_dim: int | None = None) -> LinearizeConfig:
    return LinearizeConfig(
        update="linear",
        feature_map="hedgehog",
        feature_dim=feature_dim,
        budget=window,
        window=window,
    )


def liger_gla(window: int = 64) -> LinearizeConfig:
    return LinearizeConfig(
        update="diag_gated",
        feature_map="liger",
        normalize=False,
        gate_source="key",
        budget=window,
        window=window,
        state_covers="all",
        combine="half",
    )


def lola(
    sinks: int = 4, window: int = 60, cache: int = 64, feature_dim: int | None = None
) -> LinearizeConfig:
    return LinearizeConfig(
        update="linear",
        feature_map="hedgehog",
        feature_dim=feature_dim,
        budget=sinks + window + cache,
        sinks=sinks,
        window=window,
        routing="self_recall",
    )


BASELINES: dict[str, Callable[..., LinearizeConfig]] = {
    "sliding_window": sliding_window,
    "streaming_llm": streaming_llm,
    "elu_linear": elu_linear,
    "hedgehog": hedgehog,
    "lolcats": lolcats,
    "liger_gla": liger_gla,
    "lola": lola,
}
