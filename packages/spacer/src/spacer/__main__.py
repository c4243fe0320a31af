"""``python -m spacer reproduce --scale quick --out DIR``."""

from paper_common import main
from spacer.reproduce import reproduce

if __name__ == "__main__":
    raise SystemExit(main(reproduce, prog="spacer"))
