"""``python -m lora_alpha reproduce --scale quick --out DIR``."""

from lora_alpha.reproduce import reproduce
from paper_common import main

if __name__ == "__main__":
    raise SystemExit(main(reproduce, prog="lora_alpha"))
