"""``python -m drift_probe reproduce --scale quick``."""

from drift_probe.reproduce import reproduce
from paper_common import main

raise SystemExit(main(reproduce, prog="python -m drift_probe"))
