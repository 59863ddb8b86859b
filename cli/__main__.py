"""``python -m cli ...`` is the ``ledger`` command line."""

import sys

from cli.main import main

sys.exit(main())
