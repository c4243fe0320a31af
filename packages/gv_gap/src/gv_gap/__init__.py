"""gv_gap: the factual generation-verification gap, traced through acquisition, continual learning
and updating (Davidson, Surina, Gulcehre, "The Future of Facts", arXiv 2605.27564).

Measure on any causal LM with :func:`evaluate_gv`; train and trace the three phases with
:func:`run_gv`; rerun the headline experiment with ``python -m gv_gap reproduce --scale quick``.
"""

from gv_gap.curves import (
    Discordance,
    LearningTime,
    discordance_test,
    learning_epoch,
    learning_time,
    plateau,
    retention,
)
from gv_gap.items import (
    POLARITIES,
    GVItem,
    format_pairs,
    statement_texts,
    verification_prompt,
    verification_target,
    world_items,
)
from gv_gap.measure import (
    GVResult,
    SongGap,
    evaluate_gv,
    grade,
    measure_song_gap,
    song_gap,
    two_by_two,
    unknown_words,
    verification_rates,
)
from gv_gap.phases import PHASES, GVConfig, GVRun, run_gv, saturation_epoch

__all__ = [
    "PHASES",
    "POLARITIES",
    "Discordance",
    "GVConfig",
    "GVItem",
    "GVResult",
    "GVRun",
    "LearningTime",
    "SongGap",
    "discordance_test",
    "evaluate_gv",
    "format_pairs",
    "grade",
    "learning_epoch",
    "learning_time",
    "measure_song_gap",
    "plateau",
    "retention",
    "run_gv",
    "saturation_epoch",
    "song_gap",
    "statement_texts",
    "two_by_two",
    "unknown_words",
    "verification_prompt",
    "verification_rates",
    "verification_target",
    "world_items",
]
