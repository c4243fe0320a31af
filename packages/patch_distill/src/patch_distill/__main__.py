"""``python -m patch_distill reproduce --scale quick --out DIR``."""

from paper_common import main
from patch_distill.reproduce import reproduce

if __name__ == "__main__":
    raise SystemExit(main(reproduce, prog="patch_distill"))
