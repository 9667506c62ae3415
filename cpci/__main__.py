"""`python -m cpci` is the `cpci` command."""

import sys

from cpci.cli import main

sys.exit(main())
