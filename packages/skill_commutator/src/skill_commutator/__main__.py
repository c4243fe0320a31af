"""``python -m skill_commutator reproduce --scale quick``."""

from paper_common import main
from skill_commutator.reproduce import reproduce

raise SystemExit(main(reproduce, prog="python -m skill_commutator"))
