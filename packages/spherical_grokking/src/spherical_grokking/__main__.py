from paper_common import main
from spherical_grokking.reproduce import reproduce

raise SystemExit(main(reproduce, prog="spherical_grokking"))
