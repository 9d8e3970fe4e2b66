"""``python -m benchmarks [--quick] [--rounds N] [--output DIR] [--only ids]``."""

import sys

from benchmarks.run import main

sys.exit(main())
