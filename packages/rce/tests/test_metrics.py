"""Per-request measurements: what a request without a neighbourhood gets."""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from rce.metrics import evaluate_requests  # noqa: E402
from rce.requests import EditRequest  # noqa: E402


def test_a_request_without_neighbours_has_no_neighbourhood_accuracy(
    random_lm, small_tok, small_world
):
    people, cities = small_world.entities["person"], small_world.entities["city"]
    with_n = EditRequest(
        "{} was born in",
        people[0],
        cities[0],
        cities[1],
        neighbours=((f"{people[1]} was born in", cities[2]),),
    )
    without = EditRequest("{} was born in", people[2], cities[3], cities[4])
    out = evaluate_requests(random_lm, small_tok, [with_n, without], budgets=(1,))
    acc = out["neighbour_acc"]
    assert np.isfinite(acc[0])
    assert acc[0] in (0.0, 1.0)
    assert np.isnan(acc[1])  # was 0.0: "every neighbour changed" for a request that has none


def _counterfact_sample() -> list[dict]:
    """Four records in ROME's CounterFact format: two-word new targets, neighbours, paraphrases."""
    people = ["Ada Brook", "Carl Dune", "Edna Fjord", "Gus Heath"]
    cities = ["Oslo", "Lima", "Quito", "Rome"]
    new = ["New Amsterdam", "Port Royal", "Cape Town", "Santa Fe"]
    return [
        {
            "case_id": i,
            "requested_rewrite": {
                "prompt": "{} was born in",
                "subject": p,
                "target_true": {"str": c},
                "target_new": {"str": n},
                "relation_id": "P19",
            },
            "paraphrase_prompts": [f"Where was {p} born? {p} was born in"],
            "neighborhood_prompts": [f"{people[(i + 1) % 4]} lives in"],
        }
        for i, (p, c, n) in enumerate(zip(people, cities, new, strict=True))
    ]


def _sample_model(records):
    from paper_common.lm import build_tokenizer, tiny_causal_lm

    texts = ["Q: What is the capital? A: Santa Fe"]
    for r in records:
        rw = r["requested_rewrite"]
        head = rw["prompt"].format(rw["subject"])
        texts += [f"{head} {rw['target_true']['str']} {rw['target_new']['str']}."]
        texts += [*r["paraphrase_prompts"], *r["neighborhood_prompts"]]
    tok = build_tokenizer(texts)
    return tiny_causal_lm(tok, "gpt2", n_layers=2, d_model=32, n_heads=4, seed=3), tok


def test_counterfact_sample_with_two_word_targets_is_evaluated(tmp_path):
    """CounterFact's new targets and zsRE's answers are often several tokens: evaluate_requests
    crashed on them (answer_id). Efficacy is now the greedy continuation matching every target
    token; the Output Attack leaves out the target's first token."""
    from rce.requests import load_counterfact

    records = _counterfact_sample()
    path = tmp_path / "counterfact.json"
    path.write_text(json.dumps(records))
    model, tok = _sample_model(records)
    reqs = load_counterfact(path, tok, seed=0)
    assert len(reqs) == 4
    out = evaluate_requests(
        model, tok, reqs, utility=[("Q: What is the capital? A:", "Santa Fe")], budgets=(1, 10)
    )
    assert out["target_top1"].shape == (4,)
    assert np.isfinite(out["neighbour_acc"]).all()
    assert np.isfinite(out["utility_acc"]).all()
    assert "chance/10" in out  # CounterFact requests now carry decoys
    # efficacy by brute force: teacher-forced greedy decoding reproduces every target token
    for r, hit in zip(reqs, out["target_top1"], strict=True):
        ids = tok(r.text())["input_ids"]
        ok = True
        for t in tok(" " + r.target, add_special_tokens=False)["input_ids"]:
            with torch.no_grad():
                ok &= int(model(input_ids=torch.tensor([ids])).logits[0, -1].argmax()) == t
            ids = [*ids, t]
        assert bool(hit) == ok


def test_leakage_is_measured_among_successful_edits():
    """A failed edit leaves the true answer at top-1, which the Output Attack (target excluded)
    counts as a leak: the headline reads only the edits that took."""
    from rce.metrics import among_successful

    res = {
        "edit_success": np.array([True, True, False, False]),
        "success/output/10": np.array([False, True, True, True]),
        "true_rank": np.array([50, 3, 1, 1]),
    }
    sub = among_successful(res)
    assert sub["success/output/10"].tolist() == [False, True]
    assert float(np.median(sub["true_rank"])) == 26.5
    with pytest.raises(ValueError, match="edit_success"):
        among_successful({"true_rank": np.array([1])})


def test_an_erasure_edit_took_when_the_true_token_left_the_top(random_lm, small_tok, small_world):
    people, cities = small_world.entities["person"], small_world.entities["city"]
    reqs = [EditRequest("{} was born in", people[i], cities[i], cities[i + 1]) for i in range(3)]
    out = evaluate_requests(random_lm, small_tok, reqs, budgets=(1, 10), erasure=True)
    np.testing.assert_array_equal(out["edit_success"], out["true_rank"] > 1)
    # no target in erasure mode: the Output Attack reads the raw top-B
    np.testing.assert_array_equal(out["success/output/10"], out["success/output_raw/10"])
    plain = evaluate_requests(random_lm, small_tok, reqs, budgets=(1,))
    np.testing.assert_array_equal(plain["edit_success"], plain["target_top1"])


def test_requests_with_different_numbers_of_held_out_prompts_are_all_scored(
    random_lm, small_tok, small_world
):
    """CounterFact records keep different numbers of paraphrases (those without the subject are
    dropped): paraphrase fidelity was NaN for every request then, and IR was not run."""
    people, cities = small_world.entities["person"], small_world.entities["city"]
    one = EditRequest("{} was born in", people[0], cities[0], cities[1],
                      attack_prompts=("{} is a native of",))  # fmt: skip
    two = EditRequest("{} was born in", people[1], cities[2], cities[3],
                      attack_prompts=("{} is a native of", "{} comes from"))  # fmt: skip
    out = evaluate_requests(random_lm, small_tok, [one, two], budgets=(1, 20))
    assert np.isfinite(out["paraphrase"]).all()
    assert out["paraphrase"][0] in (0.0, 1.0)
    assert "success/ir/20" in out  # on each request's first (fewest) prompts
