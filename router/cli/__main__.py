"""``python -m subroute.cli``: the same as the ``subroute`` command."""

import sys

from subroute.cli.main import main

sys.exit(main())
