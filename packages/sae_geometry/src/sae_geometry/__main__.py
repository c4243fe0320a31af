"""``python -m sae_geometry reproduce --scale quick``."""

from paper_common import main
from sae_geometry.reproduce import reproduce

raise SystemExit(main(reproduce, prog="python -m sae_geometry"))
