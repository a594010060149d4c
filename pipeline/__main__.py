"""`python -m pipeline COMMAND ...`: the group analytics (see pipeline/analytics/cli.py)."""

import sys

from pipeline.analytics.cli import main

sys.exit(main())
