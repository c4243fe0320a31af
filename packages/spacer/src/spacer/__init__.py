"""spacer: one-pass frequency estimation without predictions (SpaceR), the classical sketches and the
learning-augmented ones it is compared with, behind one interface.

>>> import numpy as np, spacer
>>> s = spacer.SpaceR(memory_words=1000).update(spacer.zipf_stream(100_000, 10_000, 1.0))
"""

from spacer.base import FrequencySketch
from spacer.baselines import (
    CountMin,
    CountSketch,
    CountSketchPlusPlus,
    LearnedCountMin,
    MisraGries,
    PredictedExact,
    PredictionCountSketch,
    SpaceSaving,
    classical_blogb_words,
    noisy_oracle,
    perfect_oracle,
    two_pass,
)
from spacer.metrics import (
    evaluate,
    heavy_hitter_scores,
    true_counts,
    unweighted_error,
    weighted_error,
)
from spacer.sketch import SampleAndHold, SpaceR, SpaceRConfig
from spacer.streams import (
    adversarial_order,
    binary_words,
    encode,
    read_items,
    stdlib_words,
    zipf_stream,
)

__all__ = [
    "CountMin",
    "CountSketch",
    "CountSketchPlusPlus",
    "FrequencySketch",
    "LearnedCountMin",
    "MisraGries",
    "PredictedExact",
    "PredictionCountSketch",
    "SampleAndHold",
    "SpaceR",
    "SpaceRConfig",
    "SpaceSaving",
    "adversarial_order",
    "binary_words",
    "classical_blogb_words",
    "encode",
    "evaluate",
    "heavy_hitter_scores",
    "noisy_oracle",
    "perfect_oracle",
    "read_items",
    "stdlib_words",
    "true_counts",
    "two_pass",
    "unweighted_error",
    "weighted_error",
    "zipf_stream",
]
