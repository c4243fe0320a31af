import pytest

from patch_distill import DiscretePopulation, GaussianPopulation, fit_discrete, fit_gaussian


def test_gaussian_predictor_reaches_the_conditional_expectation():
    pop = GaussianPopulation(context_dim=8, target_dim=4, noise_std=0.7, seed=1)
    cf = pop.closed_form()
    assert cf["loss_floor"] == pytest.approx(4 * 0.49)
    fit = fit_gaussian(pop, steps=400, seed=0)
    assert fit["loss"] == pytest.approx(cf["loss_floor"], rel=0.05)
    assert fit["retained_variance"] == pytest.approx(cf["retained_variance"], rel=0.05)
    assert fit["retained_unpredictable"] < 0.02
    vis = fit_gaussian(pop, visible=True, steps=400, seed=0)  # the unmasked patch keeps everything
    assert vis["loss"] < 0.1 * cf["loss_floor"]
    assert vis["retained_unpredictable"] > 0.9


def test_discrete_predictor_averages_the_teacher_over_the_hidden_token():
    pop = DiscretePopulation(n_contexts=4, n_hidden=3, n_prototypes=6, seed=2)
    cf = pop.closed_form()
    assert cf["averaged_out"] > 0.1  # Jensen gap: the hidden token carries information
    fit = fit_discrete(pop, steps=600, seed=0)
    assert fit["loss"] == pytest.approx(cf["loss_floor"], rel=0.01)
    assert fit["averaged_out"] == pytest.approx(cf["averaged_out"], rel=0.05)
    assert fit["tv_to_optimum"] < 0.02
    assert pop.closed_form(visible=True)["averaged_out"] == 0.0


def test_bad_population_arguments():
    with pytest.raises(ValueError, match="noise_std"):
        GaussianPopulation(noise_std=-1)
    with pytest.raises(ValueError, match="temperature"):
        DiscretePopulation(temperature=0)
