"""``python -m resurgo``: the command-line tool."""

import sys

from resurgo.cli import main

if __name__ == "__main__":
    sys.exit(main())
