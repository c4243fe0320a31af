from halluc_labels.reproduce import reproduce
from paper_common import main

raise SystemExit(main(reproduce, prog="halluc_labels"))
