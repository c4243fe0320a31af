"""``python -m gv_gap reproduce --scale quick``."""

from gv_gap.reproduce import reproduce
from paper_common import main

raise SystemExit(main(reproduce, prog="python -m gv_gap"))
