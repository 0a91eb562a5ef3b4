#!/usr/bin/env python3
"""For a checkout: runs lins_analysis.compare_plans, as
    python3 -m lins_analysis.compare_plans
does (see that module for what it does and its arguments). Python finds the package beside this file, or else the
installed one (scripts/install-deps.sh)."""

import sys

from lins_analysis.compare_plans import main

if __name__ == "__main__":
    sys.exit(main())
