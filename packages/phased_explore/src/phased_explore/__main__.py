from paper_common import main
from phased_explore.reproduce import reproduce

raise SystemExit(main(reproduce, prog="phased_explore"))
