"""``python -m alignment_geometry reproduce --scale quick``."""

from alignment_geometry.reproduce import reproduce
from paper_common import main

raise SystemExit(main(reproduce, prog="python -m alignment_geometry"))
