"""``python -m consumers ...`` is the ``ledger`` command line."""

import sys

from cli.main import main

sys.exit(main())
