import numpy as np
import pytest
import torch
import transformers

from halluc_labels.labelers import (
    PROMPTS,
    BERTScore,
    ChrF,
    EmbeddingCosine,
    ExactMatch,
    JudgeLabeler,
    LMEmbedder,
    NLILabeler,
    RougeL,
    SentenceBLEU,
    SentenceTransformerEmbedder,
    TokenF1,
    judge_prompt,
    token_f1,
)
from paper_common.lm import build_tokenizer, tiny_causal_lm

Q = ["Who wrote Hamlet?", "What is the capital of France?", "Largest planet?"]
R = [["William Shakespeare", "Shakespeare"], "Paris", "Jupiter"]


def test_exact_match_and_f1_on_squad_examples():
    # SQuAD normalisation: case, punctuation and articles go
    assert ExactMatch().score(["q"], ["Eiffel Tower"], ["The Eiffel tower!"])[0] == 1.0
    assert ExactMatch().score(["q"], [["Paris", "City of Light"]], ["city of light"])[0] == 1.0
    assert ExactMatch().score(["q"], ["Paris"], ["Paris, France"])[0] == 0.0
    # "the cat sat" -> [cat, sat]; "a cat sat down" -> [cat, sat, down]: P 1, R 2/3, F1 0.8
    assert token_f1("the cat sat", "a cat sat down") == pytest.approx(0.8)
    assert token_f1("Paris", "Lyon") == 0.0
    assert token_f1("", "") == 1.0
    f1 = TokenF1().score(Q, R, ["Shakespeare", "It is Paris", "Saturn"])
    np.testing.assert_allclose(f1, [1.0, 2 * (1 / 3) / (1 / 3 + 1), 0.0])


def _lcs(a: list[str], b: list[str]) -> int:
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            table[i + 1][j + 1] = (
                table[i][j] + 1 if x == y else max(table[i][j + 1], table[i + 1][j])
            )
    return table[-1][-1]


def test_rouge_l_equals_brute_force_lcs():
    rng = np.random.default_rng(0)
    vocab = ["red", "blue", "green", "cat", "dog", "sat", "ran", "fast"]
    refs, hyps, expected = [], [], []
    for _ in range(40):
        r = list(rng.choice(vocab, size=rng.integers(1, 7)))
        h = list(rng.choice(vocab, size=rng.integers(1, 9)))
        lcs = _lcs(h, r)
        p, rec = lcs / len(h), lcs / len(r)
        expected.append(0.0 if lcs == 0 else 2 * p * rec / (p + rec))
        refs.append(" ".join(r))
        hyps.append(" ".join(h))
    got = RougeL().score(["q"] * 40, refs, hyps)
    np.testing.assert_allclose(got, expected, atol=1e-12)


def test_lexical_thresholds_and_references():
    answers = ["Shakespeare", "Lyon", "Jupiter"]
    for labeler in (ExactMatch(), TokenF1(), RougeL(0.3), SentenceBLEU(), ChrF()):
        flags = labeler.label(Q, R, answers)
        assert flags.tolist() == [False, True, False], labeler.name
        scores = labeler.score(Q, R, answers)
        assert scores.min() >= 0.0
        assert scores.max() <= 1.0
    # a verbose correct answer: ROUGE-L flags it at 0.5, not at 0.1
    verbose = ["Paris. Paris is located in France and it is big."]
    assert RougeL(0.5).label(["q"], ["Paris"], verbose)[0]
    assert not RougeL(0.5).label(["q"], ["Paris"], verbose, threshold=0.1)[0]
    assert RougeL(0.3).name == "ROUGE-L@0.3"


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: ExactMatch().score(["a", "b"], ["x"], ["y", "z"]), "same length"),
        (lambda: ExactMatch().score(["a"], [""], ["y"]), "reference 0 is empty"),
        (lambda: ExactMatch().score(["a"], [[]], ["y"]), "reference 0 is empty"),
        (lambda: ExactMatch().label(["a"], ["x"], ["y"], threshold=1.5), "threshold must be"),
        (lambda: RougeL(-0.1), "threshold must be"),
        (lambda: judge_prompt("q", "r", "a", prompt="strict"), "unknown prompt variant"),
        (lambda: judge_prompt("q", "", "a"), "reference is empty"),
    ],
)
def test_bad_input_raises(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_one_string_instead_of_a_list_is_refused():
    with pytest.raises(TypeError, match="not one string"):
        ExactMatch().score("q", ["r"], ["a"])


@pytest.fixture(scope="module")
def tiny():
    texts = [
        judge_prompt(q, r, a, p, True, True)
        for q, r, a in zip(Q, R, ["Shakespeare", "Paris", "Jupiter"], strict=True)
        for p in PROMPTS
    ]
    tok = build_tokenizer([*texts, "0 1 -1 Lyon Saturn It is"])
    return tiny_causal_lm(tok, "llama", 1, 32, 2, seed=0), tok


def test_lm_embedding_cosine_and_calibration(tiny):
    model, tok = tiny
    labeler = EmbeddingCosine(LMEmbedder(model, tok))
    same = labeler.score(Q, R, ["Shakespeare", "Paris", "Jupiter"])
    np.testing.assert_allclose(same, 1.0, atol=1e-5)  # answer = a reference
    other = labeler.score(Q, R, ["Lyon", "Saturn", "Paris"])
    assert (other < 1.0 - 1e-4).all()
    t = labeler.calibrate(
        Q * 2,
        R * 2,
        ["Shakespeare", "Paris", "Jupiter", "Lyon", "Saturn", "Paris"],
        [False] * 3 + [True] * 3,
    )
    assert other.max() < t <= 1.0
    assert labeler.label(Q, R, ["Lyon", "Saturn", "Paris"]).all()
    with pytest.raises(ValueError, match="both hallucinated and"):
        labeler.calibrate(Q, R, Q, [True, True, True])


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory):
    """A tiny randomly initialised BERT and its word-piece tokenizer, saved to a directory."""
    path = tmp_path_factory.mktemp("bert")
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "paris", "lyon", "is", "a", "city"]
    (path / "vocab.txt").write_text("\n".join(words) + "\n")
    tok = transformers.BertTokenizerFast(vocab_file=str(path / "vocab.txt"))
    config = transformers.BertConfig(
        vocab_size=len(words),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
    )
    torch.manual_seed(0)
    transformers.BertModel(config).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def test_sentence_transformer_embedder_from_a_local_path(bert_dir, tmp_path):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    st = SentenceTransformer(modules=[Transformer(str(bert_dir)), Pooling(16, "mean")])
    st.save(str(tmp_path / "st"))
    labeler = EmbeddingCosine(SentenceTransformerEmbedder(tmp_path / "st"))
    s = labeler.score(["q", "q"], ["paris", "paris"], ["paris", "lyon is a city"])
    assert s[0] == pytest.approx(1.0, abs=1e-5)
    assert s[1] < s[0]
    with pytest.raises(ValueError, match="not a directory"):
        SentenceTransformerEmbedder(tmp_path / "nothing")


def test_bertscore_is_greedy_token_matching(bert_dir):
    scorer = BERTScore.from_pretrained(bert_dir)
    got = scorer.score(
        ["q"] * 3, ["paris", ["lyon", "paris is a city"], "a city"], ["paris", "paris", "city a"]
    )
    assert got[0] == pytest.approx(1.0, abs=1e-5)  # the reference itself
    # by hand: last-layer embeddings without [CLS]/[SEP], cosine, greedy max both ways
    model, tok = scorer.model, scorer.tokenizer

    def emb(text):
        ids = tok(text, return_tensors="pt")
        with torch.no_grad():
            h = model(**ids).last_hidden_state[0, 1:-1]
        return torch.nn.functional.normalize(h, dim=-1)

    for k, (cand, refs) in enumerate(
        [("paris", ["lyon", "paris is a city"]), ("city a", ["a city"])]
    ):
        best = 0.0
        for ref in refs:
            sim = emb(cand) @ emb(ref).T
            p, r = sim.max(1).values.mean().item(), sim.max(0).values.mean().item()
            best = max(best, 2 * p * r / (p + r))
        assert got[k + 1] == pytest.approx(best, abs=1e-5)
    with pytest.raises(ValueError, match=r"config\.json missing"):
        BERTScore.from_pretrained(bert_dir / "missing")


def _nli_model(tok, id2label):
    config = transformers.LlamaConfig(
        vocab_size=len(tok),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        pad_token_id=tok.pad_token_id,
        num_labels=len(id2label),
        id2label=id2label,
        label2id={v: k for k, v in id2label.items()},
    )
    torch.manual_seed(0)
    return transformers.LlamaForSequenceClassification(config).eval()


def test_nli_labeler_loads_from_a_local_path(tiny, tmp_path):
    _, tok = tiny
    model = _nli_model(tok, {0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"})
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    labeler = NLILabeler.from_pretrained(tmp_path)
    assert labeler.entail_index == 2
    assert labeler.tokenizer(Q)["input_ids"] == tok(Q)["input_ids"]  # not Llama's own tokenizer
    probs = labeler.probabilities(Q, R, ["Shakespeare", "Lyon", "Saturn"])
    np.testing.assert_allclose(probs.sum(1), 1.0, atol=1e-5)
    np.testing.assert_allclose(labeler.score(Q, R, ["Shakespeare", "Lyon", "Saturn"]), probs[:, 2])
    with pytest.raises(ValueError, match="cannot tell the entailment class"):
        NLILabeler(_nli_model(tok, {0: "a", 1: "b"}), tok)
    with pytest.raises(ValueError, match="entail_index must be"):
        NLILabeler(model, tok, entail_index=5)
    with pytest.raises(ValueError, match=r"config\.json missing"):
        NLILabeler.from_pretrained(tmp_path / "empty")


def test_judge_reads_label_0_vs_1(tiny):
    model, tok = tiny
    judge = JudgeLabeler(model, tok, "faithfulness")
    assert (judge.prompt, judge.criterion) == ("p1", "faithfulness")
    texts = judge.texts(Q, R, ["Shakespeare", "Lyon", "Saturn"])
    assert texts[0].endswith('{"label":')
    lp = torch.log_softmax(model(**tok(texts[:1], return_tensors="pt")).logits[0, -1].float(), -1)
    zero, one = lp[tok.convert_tokens_to_ids("▁0")], lp[tok.convert_tokens_to_ids("▁1")]
    expected = torch.sigmoid(zero - one).item()  # support: P(label 0, no hallucination)
    assert judge.score(Q[:1], R[:1], ["Shakespeare"])[0] == pytest.approx(expected, abs=1e-5)
    assert "Question:" not in JudgeLabeler(model, tok, show_question=False).texts(Q, R, Q)[0]
    assert "-1" in JudgeLabeler(model, tok, unsure=True).texts(Q, R, Q)[0]
    gen = JudgeLabeler(model, tok, verdict="generate")
    scores = gen.score(Q, R, ["a", "b", "c"])
    assert set(scores.tolist()) <= {0.0, 0.5, 1.0}
    assert 0 <= gen.unparsed <= 3
    with pytest.raises(ValueError, match="unknown prompt variant"):
        JudgeLabeler(model, tok, "lenient")
    with pytest.raises(ValueError, match="no chat template"):
        JudgeLabeler(model, tok, chat_template=True)


def test_judge_uses_the_chat_template(tiny):
    model, tok = tiny
    tok = tok.__class__.from_pretrained(tok.name_or_path) if tok.name_or_path else tok
    tok.chat_template = (
        "{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}{% endfor %} [assistant]"
    )
    judge = JudgeLabeler(model, tok)
    assert judge.chat_template
    text = judge.texts(Q[:1], R[:1], ["Shakespeare"])[0]
    assert text.startswith("[user] " + PROMPTS["p2"])
    assert "Reference answer: William Shakespeare (also: Shakespeare)." in text
    assert text.endswith('[assistant]{"label":')


class _Fixed(ExactMatch):
    """A labeler whose scores are given (a model's float32 scores, stored as float64)."""

    def __init__(self, scores):
        super().__init__()
        self.scores = np.asarray(scores, dtype=np.float64)

    def _score(self, questions, refs, answers):
        return self.scores


def test_calibrated_threshold_survives_float32_rounding():
    near_one = float(np.float32(0.9999))  # float32 spacing here is about 6e-8
    scores = [0.2, near_one, 1.0, 1.0]
    hallucinated = [True, True, False, False]
    labeler = _Fixed(scores)
    t = labeler.calibrate(["q"] * 4, ["r"] * 4, ["a"] * 4, hallucinated)
    assert t == pytest.approx((near_one + 1.0) / 2)  # the midpoint to the next distinct score
    # the same answer scored again with one float32 ulp of noise (another batch, thread count)
    again = float(np.nextafter(np.float32(near_one), np.float32(1.0)))
    assert again < t  # was cut + 1e-9: the answer flipped to "supported"
    assert (labeler.scores < t).tolist() == hallucinated


def test_calibration_edge_thresholds():
    from halluc_labels.labelers import _threshold_above

    assert _threshold_above(np.array([0.3, 0.6]), -np.inf) == 0.3  # flag nothing
    assert _threshold_above(np.array([0.3, 0.6]), 0.6) == pytest.approx(0.8)  # flag all
    assert _threshold_above(np.array([0.3, 1.0]), 1.0) == 1.0
