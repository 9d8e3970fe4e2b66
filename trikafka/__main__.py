import sys

from trikafka.cli import main

sys.exit(main())
