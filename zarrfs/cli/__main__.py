"""`python -m zarrfs.cli ARGS`: the `zarrfs` command."""

import sys

from . import main

sys.exit(main())
