"""``python -m laplacian_keyboard reproduce --scale quick --out DIR``."""

from laplacian_keyboard.reproduce import reproduce
from paper_common import main

if __name__ == "__main__":
    raise SystemExit(main(reproduce, prog="laplacian_keyboard"))
