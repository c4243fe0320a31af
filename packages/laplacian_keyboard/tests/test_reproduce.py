import pytest

from laplacian_keyboard.reproduce import reproduce
from paper_common import Report


def test_smoke_reproduce_writes_a_report(tmp_path):
    report = reproduce("smoke", seed=0, out_dir=tmp_path / "r")
    names = [c.statement for c in report.claims]
    assert len(names) == 6
    assert len(set(names)) == 6
    for c in report.claims:
        assert c.verdict in ("supported", "refuted", "inconclusive")
        assert c.missing_parts() == []
    # the two exact-DP invariants (theorems met by our code): checks, supported at any scale
    inspan = report.claims[0]
    assert inspan.value < 1e-6  # the library holds an optimal policy for every in-span reward
    bound = next(c for c in report.claims if "bounded" in c.statement)
    assert -1e-9 <= bound.value <= 1  # the measured gap never exceeds the bound
    for check in (inspan, bound):
        assert check.kind == "check"
        assert check.verdict == "supported"
        assert check.negative.verdict == "refuted"
    control = report.claims[-1]
    assert "TD3" in control.statement
    assert control.negative.description.startswith("the same difference with LK on a random")
    # the claim runs on the state-based reward; the torque-cost Reacher is a limitation table
    ctrl = next(v for k, v in report.tables.items() if k.startswith("Reacher-v5") and "TD3" in k)
    assert {r["control weight"] for r in ctrl} == {0.0}
    limit = next(v for k, v in report.tables.items() if k.startswith("Limitation (not a claim)"))
    assert {r["control weight"] for r in limit} == {1.0}
    assert len(limit) == len(ctrl)
    lib_rows = report.tables["Behaviour library (reward-free, optimal from the start state)"]
    assert all("complete" in r for r in lib_rows)
    loaded = Report.from_json(tmp_path / "r")
    assert loaded.package == "laplacian_keyboard"
    assert loaded.scale == "smoke"
    files = {p.name for p in (tmp_path / "r").iterdir()}
    assert {"eigenvectors.png", "learning_curves.png", "bounds.png", "report.md"} <= files
    tasks = report.tables["Every task (normalised returns; steps to 80% of optimal, inf = never)"]
    assert {r["family"] for r in tasks} == {"goal", "lava", "goal_continuing"}
    assert all(abs(r["GPI(library)"]) <= 1 + 1e-9 for r in tasks)  # normalised by the optimum


def test_bad_scale():
    with pytest.raises(ValueError, match="scale"):
        reproduce("medium")
