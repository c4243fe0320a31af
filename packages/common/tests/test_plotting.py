import pytest

from paper_common.plotting import new_figure, save_figure


def test_save_figure_writes_png_and_closes(tmp_path):
    import matplotlib.pyplot as plt

    fig, axes = new_figure(1, 2)
    assert len(axes) == 2
    assert tuple(fig.get_size_inches()) == pytest.approx((9.0, 3.2))
    path = save_figure(fig, tmp_path / "sub" / "plot.png")
    assert path.read_bytes()[:4] == b"\x89PNG"
    assert not plt.fignum_exists(fig.number)


def test_save_figure_rejects_bad_input(tmp_path):
    fig, _ = new_figure()
    with pytest.raises(ValueError, match="PNG"):
        save_figure(fig, tmp_path / "plot.pdf")
    with pytest.raises(TypeError, match="Figure"):
        save_figure("fig", tmp_path / "plot.png")  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []
