"""`python -m claims.allocator`: the conformance contract's command (see `dralib.allocator`)."""

import sys

from dralib.allocator.__main__ import main

if __name__ == "__main__":
    sys.exit(main())
