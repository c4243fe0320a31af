"""The report's figures keep every method apart: no two curves in one panel share a colour."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from spacer.reproduce.figures import SHOWN, error_vs_memory, error_vs_noise
from spacer.reproduce.scales import SCALES


def _rows(methods: tuple[str, ...], key: str, xs: tuple) -> list[dict]:
    return [
        {"method": m, key: x, "exponent": 1.0, "weighted_error": 1.0 + i + j}
        for i, m in enumerate(methods)
        for j, x in enumerate(xs)
    ]


def test_memory_figure_gives_each_method_its_own_colour() -> None:
    cfg = SCALES["quick"]
    rows = [
        {**r, "exponent": a}
        for a in cfg.exponents
        for r in _rows(SHOWN, "budget", tuple(cfg.budgets))
    ]
    fig = error_vs_memory(rows, cfg)
    for ax in fig.axes:
        colours = [line.get_color() for line in ax.get_lines()]
        assert len(colours) == len(SHOWN)
        # before the fix the ninth curve (SpaceSaving at B log B) took SpaceR's colour
        assert len(set(colours)) == len(SHOWN), colours


def test_noise_figure_gives_each_method_its_own_colour() -> None:
    methods = tuple(f"method {i}" for i in range(10))
    fig = error_vs_noise(_rows(methods, "noise", (0.0, 0.5)), 1.0, 1000)
    colours = [line.get_color() for line in fig.axes[0].get_lines()]
    assert len(set(colours)) == len(methods), colours
