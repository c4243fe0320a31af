"""What a default fact LM knows: the table "Fact LMs at quick scale" of docs/packages/common.md.

Trains ``fact_lm(World(seed=s), seed=s)`` (the default 2-block d=128 Llama, 2000 steps) for three
seeds, uncached, and prints exact-match QA and True/False accuracy on format facts (trained) and
target facts (statements only). Not a ``bench_*`` file: minutes per seed, run it by hand:
``uv run python packages/common/benchmarks/fact_lm_quality.py``.
"""

from __future__ import annotations

import numpy as np

from paper_common.facts import World, is_correct
from paper_common.lm import fact_lm, greedy_answer, next_token_logprobs


def _qa(model, tok, items) -> float:
    answers = greedy_answer(model, tok, [q.question for q in items], max_new_tokens=6)
    return float(np.mean([is_correct(a, q) for a, q in zip(answers, items, strict=True)]))


def _tf(model, tok, items) -> float:
    lp = next_token_logprobs(model, tok, [v.prompt for v in items])
    t_id, f_id = (tok(w, add_special_tokens=False)["input_ids"][0] for w in (" True", " False"))
    pred = (lp[:, t_id] > lp[:, f_id]).numpy()
    return float(np.mean(pred == np.array([v.label for v in items])))


def main() -> None:
    print(
        "| World/model seed | train s | QA, format facts (trained) | QA, target facts (statements "
        "only) | QA, target facts, unseen phrasing | True/False, format facts | True/False, target facts |"
    )
    print("|---|---|---|---|---|---|---|")
    for s in (0, 1, 2):
        w = World(seed=s)
        model, tok = fact_lm(w, seed=s, cache=False, progress=False)
        row = [
            model.fact_lm_info["seconds"],
            _qa(model, tok, w.qa_pairs("train")),
            _qa(model, tok, w.qa_pairs("heldout")),
            _qa(model, tok, w.qa_pairs("heldout", templates="heldout")),
            _tf(model, tok, w.verification_items("train")),
            _tf(model, tok, w.verification_items("heldout")),
        ]
        print(f"| {s} | " + " | ".join(f"{x:.4g}" for x in row) + " |")


if __name__ == "__main__":
    main()
