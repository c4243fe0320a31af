"""``python -m vepo reproduce --scale quick --out DIR``."""

from paper_common import main
from vepo.reproduce import reproduce

if __name__ == "__main__":
    raise SystemExit(main(reproduce, prog="vepo"))
