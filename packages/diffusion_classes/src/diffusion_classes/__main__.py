from diffusion_classes.reproduce import reproduce
from paper_common import main

raise SystemExit(main(reproduce, prog="diffusion_classes"))
