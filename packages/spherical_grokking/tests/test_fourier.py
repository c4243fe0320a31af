import numpy as np
import pytest
import torch
from torch import nn

from spherical_grokking import (
    ModelConfig,
    build_model,
    cyclic_structure,
    discrete_log,
    embedding_spectrum,
    fourier_analysis,
    fraction_explained,
    key_frequencies,
    modular_task,
    permutation_task,
    restricted_excluded_loss,
    split,
)


def planted(structure, freq, d=16, noise=0.05, seed=0):
    """Embeddings whose first two columns are cos / sin of a planted frequency of the coordinate."""
    rng = np.random.default_rng(seed)
    n = len(structure.coords)
    w = noise * rng.standard_normal((n + 1, d))  # one extra row: the '=' token
    c = structure.coords
    inside = c >= 0
    w[:n][inside, 0] += np.cos(2 * np.pi * freq * c[inside] / structure.period)
    w[:n][inside, 1] += np.sin(2 * np.pi * freq * c[inside] / structure.period)
    return w


@pytest.mark.parametrize(("op", "freq"), [("+", 7), ("-", 3), ("*", 11), ("/", 5)])
def test_the_spectrum_recovers_a_planted_frequency(op, freq):
    structure = cyclic_structure(modular_task(op, 59))
    spectrum = embedding_spectrum(planted(structure, freq), structure)
    assert key_frequencies(spectrum, 1)[0] == freq
    assert fraction_explained(spectrum, [freq]) > 0.8
    # Parseval: the energies add up to the centred sum of squares of the ordered rows
    rows = planted(structure, freq)[structure.order()]
    assert spectrum.sum() == pytest.approx(((rows - rows.mean(0)) ** 2).sum())


def test_multiplication_lives_on_the_discrete_log():
    s = cyclic_structure(modular_task("*", 13))
    assert s.period == 12
    assert s.sign_b == 1
    np.testing.assert_array_equal(s.coords, discrete_log(13))
    assert 0 not in s.order()  # 0 is outside Z_13^*


def test_random_embeddings_spread_their_energy():
    structure = cyclic_structure(modular_task("+", 59))
    w = np.random.default_rng(1).standard_normal((60, 32))
    spectrum = embedding_spectrum(w, structure)
    fve = fraction_explained(spectrum, key_frequencies(spectrum, 5))
    assert fve < 0.4  # chance is 5 / 29 = 0.17; a planted frequency gives > 0.8


class FourierAdder(nn.Module):
    """logits[c] = cos(w_f (a + b - c)) summed over ``freqs``: the grokked circuit, written down."""

    def __init__(self, p: int, freqs: list[int], noise: float = 0.0) -> None:
        super().__init__()
        self.p, self.freqs, self.noise = p, freqs, noise
        self.dummy = nn.Parameter(torch.zeros(1))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        a, b = tokens[:, :1].double(), tokens[:, 1:2].double()
        c = torch.arange(self.p, dtype=torch.float64)
        logits = sum(torch.cos(2 * np.pi * f * (a + b - c) / self.p) for f in self.freqs)
        wobble = self.noise * torch.sin(2 * np.pi * 1 * (a - 2 * b + 3 * c) / self.p)  # not a + b
        return 8.0 * logits + wobble


def test_restricted_and_excluded_loss_on_a_known_fourier_circuit():
    p = 23
    data = split(modular_task("+", p), 0.4, seed=0)
    model = FourierAdder(p, [3, 8], noise=2.0)
    out = restricted_excluded_loss(model, data, [3, 8])
    # keeping only the key frequencies removes the wobble: restricted loss below the full loss
    assert out["restricted_loss"] < out["loss"]
    assert out["restricted_acc"] == 1.0
    # removing them leaves no information about a + b: excluded loss at least log p
    assert out["excluded_loss"] >= np.log(p) - 0.05
    assert out["train_loss"] < 0.5 * np.log(p)
    wrong = restricted_excluded_loss(model, data, [1, 2])
    assert wrong["restricted_loss"] > out["restricted_loss"] + 1


def test_fourier_analysis_of_a_model_and_its_errors():
    task = modular_task("+", 13)
    model = build_model(
        ModelConfig.for_task(task, "sphere", d_model=16, n_heads=2, d_mlp=16), seed=0
    )
    report = fourier_analysis(model, split(task, 0.5), k=3)
    assert len(report.key_freqs) == 3
    assert report.chance_fve == pytest.approx(3 / 6)
    assert 0 < report.fve <= 1
    assert set(report.as_row()) >= {"key_freqs", "excluded_loss"}
    with pytest.raises(ValueError, match="cyclic structure"):
        cyclic_structure(permutation_task(3))
    with pytest.raises(ValueError, match="freqs"):
        restricted_excluded_loss(model, split(task, 0.5), [0])
    with pytest.raises(ValueError, match="k must be"):
        key_frequencies(np.ones(7), 7)
    with pytest.raises(ValueError, match="weights must be"):
        embedding_spectrum(np.ones((3, 4)), cyclic_structure(task))
