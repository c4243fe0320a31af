"""``python -m rce reproduce --scale quick``."""

from paper_common import main
from rce.reproduce import reproduce

raise SystemExit(main(reproduce, prog="python -m rce"))
