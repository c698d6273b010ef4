"""``python -m streams.worker``: see ``streams.worker.cli``."""

import sys

from streams.worker.cli import main

sys.exit(main())
