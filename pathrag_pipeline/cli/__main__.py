"""``python -m pathrag_pipeline.cli ...``: the ``pathrag`` command, as the installed script runs it (benches and tests
start it this way with the interpreter they run under). ``-m pathrag_pipeline.cli.main`` would run that module a
second time after the package imported it: slower, and Python warns about it on every start."""

import sys

from pathrag_pipeline.cli import main

sys.exit(main())
