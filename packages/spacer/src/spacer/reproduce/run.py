"""The measurements: every method's weighted error on Zipf streams over exponents, memories and
replicate seeds, the noisy-oracle sweep, a real word stream and an adversarial order."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from paper_common.experiment import replicate_seeds
from spacer.base import FrequencySketch
from spacer.baselines import (
    CountMin,
    CountSketch,
    LearnedCountMin,
    MisraGries,
    PredictedExact,
    PredictionCountSketch,
    SpaceSaving,
    classical_blogb_words,
    noisy_oracle,
    two_pass,
)
from spacer.metrics import evaluate, true_counts
from spacer.reproduce.scales import Scale
from spacer.sketch import SpaceR
from spacer.streams import adversarial_order, stdlib_words, zipf_stream

log = logging.getLogger(__name__)

TRIVIAL = "Trivial (exact on predictions)"
TRIVIAL_NOISY = "Trivial, half the predictions wrong"
PREDICTION_BASED = (
    "Learned Count-Min",
    "Prediction Count-Sketch",
    "two-pass Learned Count-Min",
    "two-pass Prediction Count-Sketch",
)
LEARNED = PREDICTION_BASED[:2]  # one-pass, given the oracle's predictions
ORACLE_METHODS = (*LEARNED, TRIVIAL)


def _feed(sketch: FrequencySketch, stream: np.ndarray, batch: int) -> FrequencySketch:
    for i in range(0, stream.size, batch):
        sketch.update(stream[i : i + batch])
    return sketch


def methods(
    stream: np.ndarray, budget: int, seed: int, batch: int, noise: float = 0.0
) -> dict[str, Callable[[], FrequencySketch]]:
    """Every method at ``budget`` words; oracle methods get the top ``budget/4`` ids (half their
    memory, as Hsu et al.) from a perfect (``noise=0``) or noisy oracle; the trivial mechanism
    gets the top ``budget/2`` (all of its memory)."""
    quarter = noisy_oracle(stream, budget // 4, noise, seed)
    half = noisy_oracle(stream, budget // 2, noise, seed)
    blogb = classical_blogb_words(budget)
    return {
        "SpaceR": lambda: SpaceR(budget, seed=seed),
        "Count-Min": lambda: CountMin.with_memory(budget, depth=2, seed=seed),
        "Count-Min (CU)": lambda: CountMin.with_memory(
            budget, depth=2, conservative=True, seed=seed
        ),
        "Count-Sketch": lambda: CountSketch.with_memory(budget, depth=3, seed=seed),
        "Misra-Gries": lambda: MisraGries.with_memory(budget),
        "SpaceSaving": lambda: SpaceSaving.with_memory(budget, untracked="zero"),
        "Learned Count-Min": lambda: LearnedCountMin(budget, quarter, depth=1, seed=seed),
        "Prediction Count-Sketch": lambda: PredictionCountSketch(
            budget, quarter, depth=3, seed=seed
        ),
        TRIVIAL: lambda: PredictedExact(budget, half),
        "two-pass Learned Count-Min": lambda: two_pass(
            stream, LearnedCountMin, budget, batch=batch, depth=1, seed=seed
        ),
        "two-pass Prediction Count-Sketch": lambda: two_pass(
            stream, PredictionCountSketch, budget, batch=batch, seed=seed
        ),
        "SpaceSaving at B log B": lambda: SpaceSaving.with_memory(blogb, untracked="zero"),
        "Misra-Gries at B log B": lambda: MisraGries.with_memory(blogb),
    }


def _run(
    name: str,
    make: Callable[[], FrequencySketch],
    stream: np.ndarray,
    ids: np.ndarray,
    f: np.ndarray,
    batch: int,
) -> dict:
    start = time.perf_counter()
    sketch = make()
    if not name.startswith("two-pass"):
        _feed(sketch, stream, batch)
    e = evaluate(sketch, ids, f)
    return {
        "method": name,
        "memory_words": e.memory_words,
        "weighted_error": e.weighted,
        "unweighted_error": e.unweighted,
        "hh_precision": e.hh_precision,
        "hh_recall": e.hh_recall,
        "seconds": time.perf_counter() - start,
    }


def grid(
    stream: np.ndarray,
    budget: int,
    seed: int,
    batch: int,
    noise: float = 0.0,
    only: tuple[str, ...] | None = None,
) -> dict[str, dict]:
    """Every method (or those in ``only``) run on ``stream`` at ``budget`` words: name -> metrics."""
    ids, f = true_counts(stream)
    out = {}
    for name, make in methods(stream, budget, seed, batch, noise).items():
        if only is None or name in only:
            out[name] = _run(name, make, stream, ids, f, batch)
    return out


@dataclass
class Results:
    """What :func:`measure` found.

    ``errors[(replicate, exponent, budget, method)]`` is a weighted error; ``noise_errors[(replicate,
    noise, method)]`` the noisy-oracle sweep at exponent ``a0`` and the claims' budget; ``rows``,
    ``noise_rows`` and ``extra_rows`` are the tables (one row per replicate).
    """

    seeds: list[int]
    a0: float
    errors: dict[tuple[int, float, int, str], float] = field(default_factory=dict)
    noise_errors: dict[tuple[int, float, str], float] = field(default_factory=dict)
    rows: list[dict] = field(default_factory=list)
    noise_rows: list[dict] = field(default_factory=list)
    extra_rows: list[dict] = field(default_factory=list)
    stdlib_size: tuple[int, int] = (0, 0)

    def by(self, replicate: int) -> dict[tuple[float, int, str], float]:
        """One replicate's errors keyed ``(exponent, budget, method)``."""
        return {k[1:]: v for k, v in self.errors.items() if k[0] == replicate}


def measure(cfg: Scale, seed: int) -> Results:
    """Run the grid over exponents x memories x methods, the noise sweep and the extra streams for
    :attr:`Scale.seeds` replicates derived from ``seed``."""
    seeds = replicate_seeds(seed, cfg.seeds)
    a0 = 1.0 if 1.0 in cfg.exponents else cfg.exponents[0]
    res = Results(seeds=seeds, a0=a0)
    B = cfg.budget
    for rep, s in enumerate(seeds):
        for a in cfg.exponents:
            stream = zipf_stream(cfg.n, cfg.universe, a, seed=s)
            for b in cfg.budgets:
                log.info("replicate %d, zipf %.2f, B=%d", rep, a, b)
                for name, r in grid(stream, b, s, cfg.batch).items():
                    res.rows.append({"replicate": rep, "exponent": a, "budget": b, **r})
                    res.errors[(rep, a, b, name)] = r["weighted_error"]
            # claim 3's negative control: the trivial mechanism with half its predictions wrong
            noisy = grid(stream, B, s, cfg.batch, noise=0.5, only=(TRIVIAL,))[TRIVIAL]
            res.errors[(rep, a, B, TRIVIAL_NOISY)] = noisy["weighted_error"]
        stream = zipf_stream(cfg.n, cfg.universe, a0, seed=s)
        for noise in cfg.noises:
            out = grid(stream, B, s, cfg.batch, noise, only=(*ORACLE_METHODS, "SpaceR"))
            for r in out.values():
                res.noise_rows.append({"replicate": rep, "noise": noise, **r})
                res.noise_errors[(rep, noise, r["method"])] = r["weighted_error"]
        if rep == 0:  # one real stream and one adversarial order: a table, not a claim
            words, vocab = stdlib_words(cfg.stdlib_files)
            res.stdlib_size = (int(words.size), int(vocab.size))
            for label, st in (
                ("Python stdlib words", words),
                (f"Zipf {a0}, heavy items last", adversarial_order(stream)),
            ):
                for r in grid(st, B, s, cfg.batch).values():
                    res.extra_rows.append(
                        {
                            "stream": label,
                            "n": int(st.size),
                            **{k: r[k] for k in ("method", "memory_words", "weighted_error")},
                            "hh_recall": r["hh_recall"],
                        }
                    )
    return res
