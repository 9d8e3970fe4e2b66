"""``python -m benchmarks [--quick] [--rounds N] [--output DIR] [--only ids] [--scale [--scale-max N]]``."""

import sys

from benchmarks.run import main

sys.exit(main())
