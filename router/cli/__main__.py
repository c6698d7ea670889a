"""``python -m router.cli``: the same as the ``subroute`` command."""

import sys

from router.cli.main import main

sys.exit(main())
