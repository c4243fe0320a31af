"""``python -m linearize reproduce --scale quick --out DIR``."""

from linearize.reproduce import reproduce
from paper_common import main

if __name__ == "__main__":
    raise SystemExit(main(reproduce, prog="linearize"))
