"""``python -m halluc_labels reproduce``: automated hallucination labels against both criteria.

Three generators answer the same held-out questions of three synthetic datasets (the natural
pairs, labelled by the claim parser); a controlled set holds every answer type per question. Six
lexical labelers, an embedding labeler, the NLI classifier and judges under both prompts label them
all; we measure disagreement, bias by error type, which criterion each labeler applies, and what
switching a judge's prompt does.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from halluc_labels.analysis import (
    bootstrap_kappa_diff,
    compare_labelers,
    detector_auroc,
    kappa,
    kappa_matrix,
    metrics_by_generator,
    prompt_switch,
    threshold_labels,
)
from halluc_labels.claims import agreement_claim, bias_claim, criterion_check, prompt_check
from halluc_labels.data import (
    ANSWER_TYPES,
    CORRECT_UNSUPPORTED_TYPES,
    DATASETS,
    AliasBook,
    LabeledAnswer,
    controlled_answers,
    label_answers,
    labeler_inputs,
    make_examples,
)
from halluc_labels.labelers import (
    BERTScore,
    ChrF,
    EmbeddingCosine,
    ExactMatch,
    JudgeLabeler,
    Labeler,
    LMEmbedder,
    NLILabeler,
    RougeL,
    SentenceBLEU,
    TokenF1,
)
from halluc_labels.models import GeneratorSpec, JudgeSpec, NLISpec, train_model, world_tokenizer
from paper_common import (
    Report,
    Stopwatch,
    check_scale,
    map_jobs,
    new_figure,
    pin_threads,
    write_report,
)
from paper_common.device import pinned_threads
from paper_common.facts import World
from paper_common.lm import greedy_answer, next_token_logprobs, sample, sequence_logprob

__all__ = ["SCALES", "reproduce"]

TITLE = "Reference faithfulness vs factual correctness in automated hallucination labels"

_GENERATORS = [  # name, arch, d_model, seed offset, years before the end of the World, style mix
    ("gen-llama", "llama", 64, 0, 0, (0.5, 0.2, 0.15, 0.1, 0.05)),
    ("gen-qwen2", "qwen2", 64, 1, 0, (0.3, 0.2, 0.3, 0.1, 0.1)),
    ("gen-gpt2-old", "gpt2", 64, 2, 4, (0.4, 0.3, 0.1, 0.1, 0.1)),
]
_JUDGES = [  # name, arch, d_model, seed offset, knowledge
    ("judge-llama", "llama", 64, 10, 1.0),
    ("judge-qwen2", "qwen2", 64, 11, 1.0),
    ("judge-llama-half", "llama", 64, 12, 0.5),
    ("judge-gpt2", "gpt2", 64, 13, 1.0),
    ("judge-llama-big", "llama", 128, 14, 1.0),
    ("judge-qwen2-half", "qwen2", 128, 15, 0.5),
    ("judge-llama-s2", "llama", 64, 16, 1.0),
]

SCALES: dict[str, dict[str, Any]] = {
    "smoke": {
        "world": {"n_people": 24, "n_cities": 10, "n_companies": 8, "n_countries": 4},
        "n_items": 12,
        "n_judges": 2,
        "gen_steps": 60,
        "judge_steps": 60,
        "nli_steps": 30,
        "bertscore": True,  # a full-only labeler, exercised here so the tests cover it
        "n_boot": 200,
        "workers": 1,
    },
    "quick": {
        "world": {},
        "n_items": 100,
        "n_judges": 3,
        "gen_steps": 1000,
        "judge_steps": 2000,
        "nli_steps": 1000,
        "bertscore": False,
        "n_boot": 2000,
        "workers": 2,
    },
    "full": {  # the paper's shape: 900 pairs, 7 judges; bigger models and World
        "world": {"n_people": 160, "n_cities": 40, "n_companies": 30, "n_countries": 10},
        "n_items": 100,
        "n_judges": 7,
        "gen_steps": 4000,
        "judge_steps": 8000,
        "nli_steps": 4000,
        "bertscore": True,
        "n_boot": 5000,
        "workers": 2,
    },
}
TEMPERATURE = 0.7  # generators sample: their style mix and their mistakes both show
LEXICAL = ("EM", "F1", "ROUGE-L@0.3", "ROUGE-L@0.5", "BLEU", "chrF")
TUNED = ("F1", "ROUGE-L@0.5", "BLEU", "chrF")  # scores whose threshold is chosen per generator
JUDGE_PROMPTS = ("p1", "p2", "p1s", "p2t")  # the paper's two main prompts and the two controls
N_FOLDS = 3
CONTROL_SUFFIXES = ("[p1s]", "[p2t]")
CONTRASTS = (("p1", "p2"), ("p1s", "p2t"), ("p1", "p1s"), ("p2t", "p2"))
"""Prompt contrasts per judge: the paper's main switch, the same criterion change in the other
structure (factorial controls), and the structure change under each criterion."""


def _specs(cfg: dict[str, Any], world: World, seed: int) -> list[Any]:
    gens = [
        GeneratorSpec(
            name, arch, d, 2, seed + off, world.end_year - back or None, styles, cfg["gen_steps"]
        )
        for name, arch, d, off, back, styles in _GENERATORS
    ]
    judges = [
        JudgeSpec(name, arch, d, 2, seed + off, know, cfg["judge_steps"])
        for name, arch, d, off, know in _JUDGES[: cfg["n_judges"]]
    ]
    return [*judges, *gens, NLISpec(seed=seed, steps=cfg["nli_steps"])]


_JOB: dict[str, Any] = {}


TRAIN_THREADS = 1
"""Torch threads every model is trained with, in a worker or in this process: the model caches are
keyed by the thread count, so the parent loads them under the same pin (:func:`_load_models`)."""


def _train_job(spec: Any) -> None:
    """One training job in a worker process (the World and tokenizer come from the parent)."""
    with pinned_threads(TRAIN_THREADS, torch=True):
        train_model(_JOB["world"], spec, _JOB["tok"])


def _load_models(world: World, specs: list[Any], tok: Any) -> dict[str, Any]:
    """The trained models by name, looked up with the thread count they were trained with (at
    another count the cache key differs and every model would be trained again)."""
    with pinned_threads(TRAIN_THREADS, torch=True):
        return {s.name: train_model(world, s, tok)[0] for s in specs}


def _detectors(model: Any, tok: Any, answers: list[LabeledAnswer]) -> dict[str, np.ndarray]:
    """Simple hallucination detectors on a generator's own answers (higher = more suspect)."""
    prompts = [a.example.prompt for a in answers]
    conts = [" " + (a.answer or "?") for a in answers]
    lp = next_token_logprobs(model, tok, prompts)
    entropy = -(lp.exp() * lp).sum(-1).numpy()
    mean_lp = sequence_logprob(model, tok, prompts, conts, reduction="mean").numpy()
    length = np.array([len(tok(c, add_special_tokens=False)["input_ids"]) for c in conts], float)
    return {"answer length": length, "-mean logprob": -mean_lp, "first-token entropy": entropy}


@pin_threads(torch=True)
def reproduce(
    scale: str = "quick", seed: int = 0, out_dir: str | os.PathLike[str] | None = None
) -> Report:
    """Run the experiment at ``scale`` and return (and with ``out_dir``, write) the report."""
    cfg = SCALES[check_scale(scale)]
    watch = Stopwatch()
    report = Report("halluc_labels", TITLE, scale, seed)
    world = World(seed=seed, **cfg["world"])
    book = AliasBook(world)
    tok = world_tokenizer(world, book)
    specs = _specs(cfg, world, seed)
    _JOB.update(world=world, tok=tok, workers=cfg["workers"])
    map_jobs(_train_job, specs, workers=min(cfg["workers"], len(specs)))
    models = _load_models(world, specs, tok)
    gens = [s for s in specs if isinstance(s, GeneratorSpec)]
    judges = [s for s in specs if isinstance(s, JudgeSpec)]
    report.add_table(
        "models",
        [
            {
                "model": s.name,
                "kind": type(s).__name__.replace("Spec", "").lower(),
                "arch": getattr(s, "arch", "llama"),
                "d_model": s.d_model,
                "seed": s.seed,
                "parameters": sum(p.numel() for p in models[s.name].parameters()),
                "train_s": models[s.name].info.get("seconds", float("nan")),
            }
            for s in specs
        ],
    )
    watch.lap("train models")

    # ---- natural pairs: every generator answers the same questions
    examples = [e for ds in DATASETS for e in make_examples(world, ds, n=cfg["n_items"], seed=seed)]
    natural: list[LabeledAnswer] = []
    detectors: dict[str, list[np.ndarray]] = {}
    for g in tqdm(gens, desc="generate", disable=not os.isatty(2), leave=False):
        out = sample(
            models[g.name],
            tok,
            [e.prompt for e in examples],
            n=1,
            temperature=TEMPERATURE,
            max_new_tokens=24,
            seed=seed,
        )
        labelled = label_answers(world, examples, [t[0] for t in out.texts], g.name, book)
        natural += labelled
        for k, v in _detectors(models[g.name], tok, labelled).items():
            detectors.setdefault(k, []).append(v)
    det = {k: np.concatenate(v) for k, v in detectors.items()}
    parsed_mask = np.array([a.correct is not None for a in natural])
    nat = [a for a, m in zip(natural, parsed_mask, strict=True) if m]
    det = {k: v[parsed_mask] for k, v in det.items()}
    counts = Counter((a.source, a.answer_type) for a in natural)
    report.add_table(
        "natural answer types",
        [
            {
                "generator": g.name,
                **{t: counts[(g.name, t)] for t in sorted({t for _, t in counts})},
            }
            for g in gens
        ],
    )
    watch.lap("generate natural answers")

    # ---- controlled answers on the same questions
    ctrl = controlled_answers(world, examples, seed=seed, book=book)

    # ---- labelers
    calib = controlled_answers(
        world,
        make_examples(world, "onetoken", split="train", seed=seed)
        + make_examples(world, "names", split="train", seed=seed),
        types=("exact", "wrong_value"),
        seed=seed,
        book=book,
    )
    embed = EmbeddingCosine(LMEmbedder(models[gens[0].name], tok), name="embed-cos")
    embed.calibrate(*labeler_inputs(calib), [not a.correct for a in calib])
    extra: list[Labeler] = []
    if cfg["bertscore"]:  # on the first generator's residual stream; threshold as the cosine's
        bert = BERTScore(models[gens[0].name], tok)
        bert.calibrate(*labeler_inputs(calib), [not a.correct for a in calib])
        extra.append(bert)
    labelers: list[Labeler] = [
        ExactMatch(),
        TokenF1(),
        RougeL(0.3),
        RougeL(0.5),
        SentenceBLEU(),
        ChrF(),
        embed,
        *extra,
        NLILabeler(models["nli"], tok),
    ]
    for j in judges:
        for prompt in JUDGE_PROMPTS:
            labelers.append(
                JudgeLabeler(models[j.name], tok, prompt, name=f"{j.name}[{prompt}]", compact=True)
            )
    compared_nat = compare_labelers(nat, labelers)
    # the factorial control prompts are contrasts on the natural pairs only (as in the paper)
    main_labelers = [lab for lab in labelers if not lab.name.endswith(CONTROL_SUFFIXES)]
    compared_ctrl = compare_labelers(ctrl, main_labelers, type_order=ANSWER_TYPES)
    flags_nat, flags_ctrl = compared_nat.flags, compared_ctrl.flags
    watch.lap("label")

    halluc_nat = np.array([not a.correct for a in nat])
    unfaith_nat = np.array([not a.faithful for a in nat])
    gen_nat = [a.source for a in nat]
    # lexical thresholds chosen per generator as the paper does: on the full set (oracle) and
    # out of fold (3-fold CV, the deployable one); the CV labels join the natural-pair labelers
    by_name = {lab.name: lab for lab in labelers}
    tau_rows = []
    flags_nat = dict(flags_nat)
    for n in TUNED:
        sc = by_name[n].score(*labeler_inputs(nat))
        tl = threshold_labels(sc, halluc_nat, gen_nat, N_FOLDS, seed)
        flags_nat[f"{n} cv-tau"] = tl.cv
        flags_nat[f"{n} oracle-tau"] = tl.oracle
        for g, t in tl.thresholds.items():
            tau_rows.append(
                {"labeler": n, "generator": g, "tau_oracle": t["oracle"],
                 "tau_cv_mean": float(np.mean(t["cv"])), "tau_cv_min": min(t["cv"]),
                 "tau_cv_max": max(t["cv"])}
            )  # fmt: skip
    report.add_table("lexical thresholds per generator (natural pairs)", tau_rows)
    report.add_table(
        "metrics per generator (natural pairs, truth = correctness)",
        metrics_by_generator(flags_nat, halluc_nat, gen_nat),
    )
    lexical_cv = [f"{n} cv-tau" for n in TUNED]
    report.add_table("agreement (natural pairs)", compared_nat.agreement)
    report.add_table("agreement (controlled set)", compared_ctrl.agreement)
    agreement_nat = {r["labeler"]: r for r in compared_nat.agreement}
    # one label per labeler and prompt as in the paper's kappa matrix: no factorial controls, no
    # oracle thresholds (the CV labels are the deployable ones)
    claim_flags = {
        k: v
        for k, v in flags_nat.items()
        if "oracle-tau" not in k and not k.endswith(CONTROL_SUFFIXES)
    }
    names, km = kappa_matrix(claim_flags)
    iu = np.triu_indices(len(names), 1)
    mean_pair = float(km[iu].mean())
    lexical_k = {n: kappa(flags_nat[n], halluc_nat) for n in lexical_cv}
    report.add_claim(
        agreement_claim(
            claim_flags, halluc_nat, unfaith_nat, lexical_cv, cfg["n_boot"], seed,
            f"mean pairwise kappa {mean_pair:.3f} over {len(names)} labelers; lexical kappa vs "
            "correctness " + ", ".join(f"{k} {v:.2f}" for k, v in lexical_k.items())
            + f"; {len(nat)} of {len(natural)} answers parsed",
        )
    )  # fmt: skip

    # ---- bias by type (controlled set)
    types_ctrl = [a.answer_type for a in ctrl]
    rates = compared_ctrl.flag_rates
    report.add_table(
        "flag rate by answer type (controlled set)", [{"labeler": n, **r} for n, r in rates.items()]
    )
    unsupported = np.isin(types_ctrl, CORRECT_UNSUPPORTED_TYPES)
    exact = np.asarray(types_ctrl) == "exact"
    biased = [*LEXICAL, "NLI"]
    flag_unsup = {n: float(flags_ctrl[n][unsupported].mean()) for n in biased}
    flag_exact = {n: float(flags_ctrl[n][exact].mean()) for n in biased}
    rouge = agreement_nat["ROUGE-L@0.5"]
    report.add_claim(
        bias_claim(
            flags_ctrl, types_ctrl, CORRECT_UNSUPPORTED_TYPES, biased, flags_nat["ROUGE-L@0.5"],
            halluc_nat, cfg["n_boot"], seed,
            "flagged correct-unsupported: "
            + ", ".join(f"{k} {v:.2f}" for k, v in flag_unsup.items())
            + f"; exact flagged at most {max(flag_exact.values()):.2f}; ROUGE-L@0.5 on natural "
            f"pairs recall {rouge['recall']:.2f} vs precision {rouge['precision']:.2f}",
        )
    )  # fmt: skip

    # ---- which criterion: NLI and faithfulness-prompted judges
    crit_rows = []
    faith_labelers = ["NLI", *[f"{j.name}[{p}]" for j in judges for p in ("p1", "p1s")]]
    for n in faith_labelers:
        est, low, high = bootstrap_kappa_diff(
            flags_nat[n], unfaith_nat, flags_nat[n], halluc_nat, cfg["n_boot"], seed=seed
        )
        crit_rows.append(
            {"labeler": n, "kappa_faith_minus_corr": est, "ci_low": low, "ci_high": high}
        )
    report.add_table("criterion applied (natural pairs)", crit_rows)
    known = _known_masks(world, book, tok, models, judges, nat)
    report.add_claim(
        criterion_check(
            flags_nat, faith_labelers,
            [f"{j.name}[p2]" for j in judges], unfaith_nat, halluc_nat, cfg["n_boot"], seed,
            ", ".join(
                f"{r['labeler']} {r['kappa_faith_minus_corr']:+.2f} [{r['ci_low']:+.2f}, "
                f"{r['ci_high']:+.2f}]"
                for r in crit_rows
            )
            + "; judges know the fact on "
            + ", ".join(
                f"{j} {np.mean(k[unfaith_nat != halluc_nat]):.2f}" for j, k in known.items()
            )
            + " of the pairs where the criteria differ",
            known=known,
        )
    )  # fmt: skip

    # ---- the prompt switch, per judge
    switch = [
        prompt_switch(
            j.name,
            halluc_nat,
            flags_nat[f"{j.name}[{f}]"],
            flags_nat[f"{j.name}[{c}]"],
            cfg["n_boot"],
            seed,
        )
        for f, c in CONTRASTS
        for j in judges
    ]
    contrasts = [f"{f}->{c}" for f, c in CONTRASTS for _ in judges]
    report.add_table(
        "prompt switch (natural pairs, truth = correctness)",
        [{"contrast": k, **s.as_row()} for k, s in zip(contrasts, switch, strict=True)],
    )
    switch = switch[: len(judges)]  # the main contrast, p1 -> p2
    wins = sum(s.significant_gain for s in switch)
    report.add_claim(
        prompt_check(
            flags_nat, [j.name for j in judges], halluc_nat, unfaith_nat, cfg["n_boot"], seed,
            f"{wins} of {len(switch)} judges with a significant gain (McNemar p < 0.05): "
            + "; ".join(
                f"{s.judge} {s.kappa_faithfulness_prompt:.2f} -> "
                f"{s.kappa_correctness_prompt:.2f} (p={s.p_mcnemar:.2g})"
                for s in switch
            )
            + "; the known/unknown split shows how much rests on knowing the fact",
        )
    )  # fmt: skip
    report.add_table(
        "prompt switch by what the judge knows",
        _known_split(known, halluc_nat, flags_nat, cfg["n_boot"], seed),
    )

    # ---- detectors under each label source (reported, not claimed)
    sources = {
        "correctness": halluc_nat,
        "faithfulness": unfaith_nat,
        "ROUGE-L@0.5": flags_nat["ROUGE-L@0.5"],
        "NLI": flags_nat["NLI"],
        f"{judges[0].name}[p1]": flags_nat[f"{judges[0].name}[p1]"],
        f"{judges[0].name}[p2]": flags_nat[f"{judges[0].name}[p2]"],
    }
    auroc = {d: detector_auroc(s, sources) for d, s in det.items()}
    report.add_table(
        "detector AUROC by label source", [{"detector": d, **r} for d, r in auroc.items()]
    )
    watch.lap("analyse")

    _plots(report, flags_nat, halluc_nat, unfaith_nat, rates, switch, auroc)
    watch.lap("plots")
    judge_names = ", ".join(j.name for j in judges)
    report.add_table(
        "claim models",
        [
            {"claim": 1, "model": f"generators {', '.join(g.name for g in gens)}; every labeler"},
            {"claim": 2, "model": "lexical labelers and the NLI classifier (nli)"},
            {"claim": 3, "model": f"nli; judges {judge_names} (in-package fact LMs)"},
            {"claim": 4, "model": f"judges {judge_names} (in-package fact LMs)"},
        ],
    )
    report.add_table("timing", watch.laps)
    report.notes = _NOTES
    report.runtime_s = watch.elapsed_s
    if out_dir is not None:
        write_report(report, out_dir)
    return report


def _known_masks(
    world: World,
    book: AliasBook,
    tok: Any,
    models: dict[str, Any],
    judges: list[JudgeSpec],
    nat: list[LabeledAnswer],
) -> dict[str, np.ndarray]:
    """Per judge, which natural pairs' facts it knows (it answers the plain question right)."""
    unique = list(dict.fromkeys(a.example for a in nat))
    index = {e: i for i, e in enumerate(unique)}
    where = np.array([index[a.example] for a in nat], dtype=int)
    known = {}
    for j in judges:
        replies = greedy_answer(models[j.name], tok, [e.prompt for e in unique], max_new_tokens=8)
        known_ex = np.array(
            [a.correct is True for a in label_answers(world, unique, replies, j.name, book)]
        )
        known[j.name] = known_ex[where]
    return known


def _known_split(
    known_by_judge: dict[str, np.ndarray],
    halluc: np.ndarray,
    flags: dict[str, np.ndarray],
    n_boot: int,
    seed: int,
) -> list[dict[str, Any]]:
    """The prompt switch apart on facts each judge knows (answers its question right) and not."""
    rows = []
    for name, known in known_by_judge.items():
        for subset, mask in (("known", known), ("unknown", ~known)):
            row: dict[str, Any] = {"judge": name, "facts": subset, "n": int(mask.sum())}
            if mask.sum() >= 10 and 0 < halluc[mask].sum() < mask.sum():
                s = prompt_switch(
                    name,
                    halluc[mask],
                    flags[f"{name}[p1]"][mask],
                    flags[f"{name}[p2]"][mask],
                    n_boot,
                    seed,
                )
                row.update(
                    kappa_faith_prompt=s.kappa_faithfulness_prompt,
                    kappa_corr_prompt=s.kappa_correctness_prompt,
                    delta_kappa=s.delta,
                    ci_low=s.ci_low,
                    ci_high=s.ci_high,
                    p_mcnemar=s.p_mcnemar,
                )
            rows.append(row)
    return rows


def _plots(
    report: Report,
    flags: dict[str, np.ndarray],
    halluc: np.ndarray,
    unfaith: np.ndarray,
    rates: dict[str, dict[str, float]],
    switch: list[Any],
    auroc: dict[str, dict[str, float]],
) -> None:
    # kappa heatmap: every labeler plus the two criteria
    names, km = kappa_matrix({**flags, "CORRECTNESS": halluc, "FAITHFULNESS": unfaith})
    fig, ax = new_figure(size=(9, 8))
    im = ax.imshow(km, cmap="RdBu_r", vmin=-1, vmax=1)
    ax.set_xticks(range(len(names)), names, rotation=90, fontsize=7)
    ax.set_yticks(range(len(names)), names, fontsize=7)
    for (i, k), v in np.ndenumerate(km):
        ax.text(k, i, f"{v:.2f}", ha="center", va="center", fontsize=5)
    fig.colorbar(im, ax=ax, label="Cohen's kappa")
    ax.set_title("Pairwise kappa on the natural pairs (hallucinated = positive)")
    report.add_figure("kappa_heatmap", fig)

    # flag rate by answer type
    types = list(next(iter(rates.values())))
    grid = np.array([[rates[n].get(t, np.nan) for t in types] for n in rates])
    fig, ax = new_figure(size=(10, 7))
    im = ax.imshow(grid, cmap="viridis", vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(len(types)), types, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(rates)), list(rates), fontsize=7)
    for (i, k), v in np.ndenumerate(grid):
        ax.text(
            k, i, f"{v:.2f}", ha="center", va="center", fontsize=6, color="w" if v < 0.5 else "k"
        )
    fig.colorbar(im, ax=ax, label="P(flagged as hallucinated | type)")
    ax.set_title("Flag rate by answer type (controlled set)")
    report.add_figure("flag_rate_by_type", fig)

    # kappa per judge under each prompt, paired
    fig, ax = new_figure(size=(7, 4.5))
    for i, s in enumerate(switch):
        ax.plot(
            [0, 1], [s.kappa_faithfulness_prompt, s.kappa_correctness_prompt], "o-", label=s.judge
        )
        ax.errorbar(
            1.02 + 0.02 * i,
            s.kappa_correctness_prompt,
            yerr=[[s.delta - s.ci_low], [s.ci_high - s.delta]],
            fmt="none",
            alpha=0.5,
            color=ax.lines[-1].get_color(),
        )
    ax.set_xticks([0, 1], ["faithfulness prompt", "correctness prompt"])
    ax.set_ylabel("kappa vs correctness labels")
    ax.set_title("Prompt switch per judge (bars: 95% CI of the kappa change)")
    ax.legend(fontsize=7)
    report.add_figure("prompt_switch", fig)

    # detector AUROC by label source
    dets, sources = list(auroc), list(next(iter(auroc.values())))
    fig, ax = new_figure(size=(9, 4.5))
    width = 0.8 / len(sources)
    for k, src in enumerate(sources):
        ax.bar(np.arange(len(dets)) + k * width, [auroc[d][src] for d in dets], width, label=src)
    ax.axhline(0.5, color="k", lw=0.8, ls="--")
    ax.set_xticks(np.arange(len(dets)) + 0.4 - width / 2, dets)
    ax.set_ylabel("AUROC")
    ax.set_title("The same detectors ranked by different label sources")
    ax.legend(fontsize=7, ncol=2)
    report.add_figure("detector_auroc", fig)


_NOTES = """Ground truth: a synthetic World (paper_common.facts). Correctness is Valjakka et al.'s
reference-first criterion (a core answer that conflicts with the reference is a hallucination even if
true now; extra claims judged true at the query year; abstentions correct), faithfulness is support by
the reference as written plus its listed aliases (abstentions faithful); rules per answer type in
seeds/halluc_labels.md. Natural pairs: three generators (tiny Llama / Qwen2 / GPT-2 fact LMs, the last
trained on the World four years before the query year) sample answers at temperature 0.7 to the same
held-out questions; the claim parser labels them and answers it cannot read are counted in "natural
answer types" (column "unparsable") and left out. Labelers: lexical metrics at fixed thresholds on the
controlled set (EM, F1, BLEU, chrF at 0.5; ROUGE-L at 0.3 and 0.5) and, on the natural pairs, F1,
ROUGE-L, BLEU and chrF with the paper's per-generator thresholds (kappa-maximising; oracle on the full
set, 3-fold CV out of fold: the claims use CV); the embedding cosine calibrated on exact vs wrong-value
answers to format facts; the NLI baseline (premise the reference alone, P(entailment) < 0.5 flags); and
fact-LM judges under the compact forms of the paper's prompts p1, p2, p1s, p2t (JSON label, P(0) vs
P(1)). Judges and the NLI classifier were tuned only on answers where the two criteria agree, with the
same label under every prompt, so nothing in training tells the criteria apart; claim 3's positive
control asks that the judges know the facts where the criteria differ, claim 4's that they react to
the prompt at all (both ours). Claim 1's null plants agreeing labelers (correctness with 5% random
flips each). Models per claim: table
"claim models". Any HF causal LM runs as a judge on the paper's long prompts through evaluate_judge /
JudgeLabeler, on the released 900 human-labelled pairs through load_lphb.
"""
