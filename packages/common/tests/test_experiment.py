"""The shared experiment layer: scales, seeds, the reproduce entry point it builds."""

import inspect
from dataclasses import dataclass

import pytest

from paper_common import Report, main
from paper_common.experiment import check_scales, experiment, replicate_seeds


@dataclass(frozen=True)
class Size:
    n: int
    exponents: tuple[float, ...] = (1.0, 2.0)


SIZES = {"smoke": Size(1), "quick": Size(10), "full": Size(100)}


@experiment("demo", "A demo", SIZES, notes="from the layer")
def reproduce(cfg: Size, report: Report, seed: int) -> None:
    """Demo body."""
    from threadpoolctl import threadpool_info

    blas = {p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"}
    report.add_table("seen", [{"n": cfg.n, "seed": seed, "blas_threads": min(blas)}])


def test_entry_point_has_the_reproduce_signature_and_runs(tmp_path):
    params = inspect.signature(reproduce).parameters
    assert list(params) == ["scale", "seed", "out_dir"]
    assert params["scale"].default == "quick"
    report = reproduce("smoke", seed=7, out_dir=tmp_path / "r")
    assert (report.package, report.title, report.scale, report.seed) == (
        "demo",
        "A demo",
        "smoke",
        7,
    )
    assert report.tables["seen"] == [{"n": 1, "seed": 7, "blas_threads": 1}]  # pinned at smoke
    assert report.tables["configuration"] == [
        {"field": "n", "value": 1},
        {"field": "exponents", "value": "1.0, 2.0"},
    ]
    assert report.notes == "from the layer"
    assert report.runtime_s > 0
    assert Report.from_json(tmp_path / "r").tables == report.tables
    assert reproduce.__doc__ == "Demo body."


def test_entry_point_drives_the_command_line(tmp_path, capsys):
    assert main(reproduce, ["reproduce", "--scale", "smoke", "--out", str(tmp_path / "o")]) == 0
    assert "demo: 0 supported" in capsys.readouterr().out


def test_a_negative_seed_is_one_line_on_the_command_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(
            reproduce,
            ["reproduce", "--scale", "smoke", "--seed", "-1", "--out", str(tmp_path / "o")],
        )
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "non-negative" in err
    assert not (tmp_path / "o").exists()


def test_bad_input():
    with pytest.raises(ValueError, match="scale"):
        reproduce("medium")
    with pytest.raises(ValueError, match="seed"):
        reproduce("smoke", seed=-3)
    with pytest.raises(ValueError, match="smoke, quick, full"):
        check_scales({"smoke": Size(1)})

    @dataclass
    class Loose:
        n: int

    with pytest.raises(TypeError, match="frozen"):
        check_scales({"smoke": Loose(1), "quick": Loose(1), "full": Loose(1)})
    with pytest.raises(TypeError, match="dataclass instance"):
        check_scales({"smoke": Size, "quick": Size(1), "full": Size(1)})


def test_replicate_seeds_are_fixed_distinct_and_do_not_overlap_the_next_run():
    a, b = replicate_seeds(0, 5), replicate_seeds(1, 5)
    assert a == replicate_seeds(0, 5)
    assert len(set(a)) == 5
    assert not set(a) & set(b)
    assert all(0 <= s < 2**32 for s in a)
    with pytest.raises(ValueError, match="seed"):
        replicate_seeds(-1, 3)
    with pytest.raises(ValueError, match="n must"):
        replicate_seeds(0, 0)
