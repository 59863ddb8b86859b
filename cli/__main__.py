"""``python -m consumers ...`` is the ``ledger`` command line."""

import sys

from consumers.cli import main

sys.exit(main())
