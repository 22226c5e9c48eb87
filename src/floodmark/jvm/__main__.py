"""``python -m floodmark.jvm``: :func:`floodmark.jvm.cli.main`."""

import sys

from floodmark.jvm.cli import main

sys.exit(main())
