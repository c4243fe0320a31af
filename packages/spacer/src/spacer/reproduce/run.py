"""The measurements: every method's weighted error on Zipf streams over exponents, memories and
replicate seeds, the noisy-oracle sweep, the literature's prediction budget, two real streams and an
adversarial order. Every sketch is fed through ``update``, whose answer is the item-by-item
algorithm's for any batch size (the batch size only sets the speed)."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from paper_common.experiment import replicate_seeds
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
)
from spacer.metrics import evaluate, true_counts
from spacer.reproduce.scales import Scale
from spacer.sketch import SpaceR
from spacer.streams import adversarial_order, binary_words, stdlib_words, zipf_stream

log = logging.getLogger(__name__)

TRIVIAL = "Trivial (exact on predictions)"
TRIVIAL_NOISY = "Trivial, half the predictions wrong"
CS_PP_C = (5.0, 8.0, 11.0)  # Aamand et al.'s thresholds tau = C (log S / S) N
CS_PP = tuple(f"CountSketch++ C={c:g}" for c in CS_PP_C)  # no predictions
LEARNED_CS_PP = tuple(f"Learned CountSketch++ C={c:g}" for c in CS_PP_C)
LEARNED = ("Learned Count-Min", "Prediction Count-Sketch", *LEARNED_CS_PP)  # one pass, oracle
PREDICTION_BASED = (*LEARNED, "two-pass Learned Count-Min", "two-pass Prediction Count-Sketch")
ORACLE_METHODS = (*LEARNED, TRIVIAL)
NO_PREDICTIONS = ("Count-Min", "Count-Sketch", *CS_PP)  # the learned sketches without the oracle
LITERATURE_MULTIPLIERS = (1, 2, 5, 10, 20)  # S = 7 ceil(log2 n) x these (Aamand et al.'s grid)
LITERATURE_CLAIM_MULTIPLIER = 10  # the claim's S: the grid point nearest our B = 1000 (ours)


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
    first_pass: dict[str, np.ndarray] = {}  # one Misra-Gries first pass shared by both two-pass

    def cspp(c: float, pred: np.ndarray) -> Callable[[], FrequencySketch]:
        return lambda: CountSketchPlusPlus(budget, pred, C=c, seed=seed)

    def two(cls: type, **kw: object) -> Callable[[], FrequencySketch]:
        def make() -> FrequencySketch:
            if "pred" not in first_pass:
                first_pass["pred"] = misra_gries_predictions(stream, budget, batch)
            sk = cls(budget, first_pass["pred"], seed=seed, **kw)
            return _feed(sk, stream, batch)

        return make

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
        **{name: cspp(c, np.zeros(0, np.int64)) for name, c in zip(CS_PP, CS_PP_C, strict=True)},
        **{name: cspp(c, quarter) for name, c in zip(LEARNED_CS_PP, CS_PP_C, strict=True)},
        "two-pass Learned Count-Min": two(LearnedCountMin, depth=1),
        "two-pass Prediction Count-Sketch": two(PredictionCountSketch),
        "SpaceSaving at B log B": lambda: SpaceSaving.with_memory(blogb, untracked="zero"),
        "Misra-Gries at B log B": lambda: MisraGries.with_memory(blogb),
    }


def misra_gries_predictions(stream: np.ndarray, budget: int, batch: int) -> np.ndarray:
    """The first pass of :func:`~spacer.baselines.two_pass`: the top ``budget / 4`` ids of a
    Misra-Gries with ``budget`` words (ties by id)."""
    mg = _feed(MisraGries.with_memory(budget), stream, batch)
    t = mg.table
    return t.ids[np.lexsort((t.ids, -t.counts))][: budget // 4]


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
    if sketch.peak_memory_words != sketch.memory_words:  # update never holds a batch summary
        raise RuntimeError(f"{name} held {sketch.batch_words} uncounted words")
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
    binary_size: tuple[int, int] = (0, 0)
    # the literature's budget: lit_errors[(replicate, exponent, multiplier, method)]
    lit_errors: dict[tuple[int, float, int, str], float] = field(default_factory=dict)
    lit_rows: list[dict] = field(default_factory=list)

    def by(self, replicate: int) -> dict[tuple[float, int, str], float]:
        """One replicate's errors keyed ``(exponent, budget, method)``."""
        return {k[1:]: v for k, v in self.errors.items() if k[0] == replicate}


def literature_budget(n_distinct: int, multiplier: int) -> tuple[int, int]:
    """Aamand et al.'s accounting: ``ceil(log2 n)`` predictions at one word each (ids free) and
    memory ``S = 7 ceil(log2 n) x multiplier``; returns ``(S, number of predictions)``."""
    L = max(1, math.ceil(math.log2(max(n_distinct, 2))))
    return 7 * L * multiplier, L


def literature_grid(
    stream: np.ndarray, multiplier: int, seed: int, batch: int
) -> tuple[int, int, dict[str, dict]]:
    """SpaceR (ids cost a word, no predictions) against learned CountSketch++ and the trivial
    mechanism with ``ceil(log2 n)`` perfect predictions at one word each, at the literature's S."""
    ids, f = true_counts(stream)
    S, L = literature_budget(ids.size, multiplier)
    pred = perfect_oracle_from_counts(ids, f, L)
    makers: dict[str, Callable[[], FrequencySketch]] = {
        "SpaceR": lambda: SpaceR(S, seed=seed),
        "Count-Sketch": lambda: CountSketch.with_memory(S, depth=3, seed=seed),
        "Trivial (exact on predictions)": lambda: PredictedExact(2 * L, pred),
    }
    for name, c in zip(LEARNED_CS_PP, CS_PP_C, strict=True):
        makers[name] = lambda c=c: CountSketchPlusPlus(S, pred, C=c, prediction_words=1, seed=seed)
    for name, c in zip(CS_PP, CS_PP_C, strict=True):
        makers[name] = lambda c=c: CountSketchPlusPlus(S, C=c, seed=seed)
    out = {name: _run(name, make, stream, ids, f, batch) for name, make in makers.items()}
    out["Trivial (exact on predictions)"]["memory_words"] = L  # one word per prediction
    return S, L, out


def perfect_oracle_from_counts(ids: np.ndarray, f: np.ndarray, k: int) -> np.ndarray:
    """The true top ``k`` ids from exact counts (ties by id)."""
    return ids[np.lexsort((ids, -f))][:k]


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
        for a in cfg.exponents:  # the literature's prediction budget
            stream_a = zipf_stream(cfg.n, cfg.universe, a, seed=s)
            for mult in cfg.literature_multipliers:
                S, _, out = literature_grid(stream_a, mult, s, cfg.batch)
                for name, r in out.items():
                    res.lit_rows.append(
                        {"replicate": rep, "exponent": a, "multiplier": mult, "S": S, **r}
                    )
                    res.lit_errors[(rep, a, mult, name)] = r["weighted_error"]
        if rep == 0:  # two real streams and one adversarial order: a table, not a claim
            words, vocab = stdlib_words(cfg.stdlib_files)
            res.stdlib_size = (int(words.size), int(vocab.size))
            binary, bvocab = binary_words(cfg.binary_items)
            res.binary_size = (int(binary.size), int(bvocab.size))
            for label, st in (
                ("Python stdlib words", words),
                ("numpy binaries, 4-byte words", binary),
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
