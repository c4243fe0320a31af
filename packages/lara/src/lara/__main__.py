"""``python -m lara reproduce --scale quick --out DIR``."""

from lara.reproduce import reproduce
from paper_common import main

if __name__ == "__main__":
    raise SystemExit(main(reproduce, prog="lara"))
