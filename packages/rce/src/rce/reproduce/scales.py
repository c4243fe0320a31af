"""The scales of the experiment and the defences the runner knows, by name."""

from __future__ import annotations

from typing import Any

from rce.metrics import ATTACKS
from rce.objectives import Defence

# every defence the runner knows, by the name the report uses


DEFENCE_SPECS: dict[str, Defence] = {
    "none": Defence("none"),
    "fact_erasure": Defence("fact_erasure"),
    "input_rephrasing": Defence("input_rephrasing"),
    # Patil et al.'s defences in erasure mode, as published
    "head_projection": Defence("head_projection"),
    "max_entropy": Defence("max_entropy"),
    # ours: the same terms added to the target NLL (edit to the sanitized target and defend)
    "head_projection_target": Defence("head_projection", mode="target"),
    "max_entropy_target": Defence("max_entropy", mode="target"),
    "input_rephrasing_target": Defence("input_rephrasing", mode="target"),
    "revs": Defence("revs"),
    "rce": Defence("rce"),
    # ablation fixed in advance: a band of ranks [R, 2R] instead of "below R, above |V|/2"
    "rce_band": Defence("rce", floor_rank=100),
    "rce_whitebox": Defence("rce", whitebox=True),
}

_WORLD = {"n_people": 160, "n_cities": 200, "n_companies": 20, "n_countries": 8}

SCALES: dict[str, dict[str, Any]] = {
    "smoke": {
        "seeds": [0],
        "world": {"n_people": 40, "n_cities": 30, "n_companies": 6, "n_countries": 4},
        "size": "tiny4",
        "steps": 300,
        "arch": "gpt2",
        "n_edits": 8,
        "n_utility": 20,
        "editors": ["rome", "memit"],
        "defences": ["none", "rce"],
        "ablations": [],
        "rome": {"steps": 5, "clamp_norm_factor": 4.0, "contexts": ((3, 2),)},
        "clamps": [10.0],
        "memit": {
            "steps": 5,
            "clamp_norm_factor": 4.0,
            "mom2_weight": 100.0,
            "contexts": ((3, 2),),
        },
        "workers": 1,
    },
    "quick": {
        "seeds": [0, 1, 2],
        "world": _WORLD,
        "size": "tiny4",
        "steps": None,
        "arch": "gpt2",
        "n_edits": 100,
        "n_utility": 100,
        "editors": ["rome", "memit"],
        "defences": ["none", "head_projection", "rce"],
        "ablations": [("rome", "rce_band")],
        "rome": {"steps": 20, "clamp_norm_factor": 4.0, "contexts": ((5, 3),)},
        # ROME/none at these clamp factors too: the efficacy-leakage frontier
        "clamps": [2.0, 10.0],
        "memit": {
            "steps": 25,
            "clamp_norm_factor": 4.0,
            "mom2_weight": 100.0,
            "contexts": ((5, 3),),
        },
        # one single-threaded worker per seed: three processes share the two cores evenly
        "workers": 3,
    },
    # the paper's grid on the fact LMs; GPT-J-6B / Llama-2-7b on CounterFact need a GPU and the
    # local file (rce.requests.load_counterfact) and are not wired into this runner
    "full": {
        "seeds": [0, 1, 2, 3, 4],
        "world": _WORLD,
        "size": "tiny4",
        "steps": None,
        "arch": "gpt2",
        "n_edits": 100,
        "n_utility": 200,
        "editors": ["rome", "memit", "ft"],
        "defences": [
            "none",
            "fact_erasure",
            "input_rephrasing",
            "head_projection",
            "max_entropy",
            "revs",
            "rce",
        ],
        "ablations": [("rome", "rce_band"), ("rome", "rce_whitebox"), ("memit", "rce_whitebox")],
        "rome": {"steps": 20, "clamp_norm_factor": 4.0, "contexts": ((5, 10), (10, 10))},
        "clamps": [1.0, 2.0, 10.0, 20.0],
        "memit": {
            "steps": 25,
            "clamp_norm_factor": 4.0,
            "mom2_weight": 100.0,
            "contexts": ((5, 10),),
        },
        "ft": {"steps": 25, "lr": 5e-4, "norm_bound": 5e-4},
        "workers": 2,
    },
}

# display names of the attacks rce.metrics scores, in its order
ATTACK_LABELS = dict(
    zip(
        ATTACKS,
        (
            "Output (target excluded)",
            "Output (raw top-B)",
            "Head Projection",
            "Probability Delta",
            "Input Rephrasing",
        ),
        strict=True,
    )
)


def _cells(cfg: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e, d) for e in cfg["editors"] for d in cfg["defences"]] + [
        tuple(a) for a in cfg["ablations"]
    ]
