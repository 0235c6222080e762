"""``python -m pgtwin.cli`` runs the command line, as ``python -m pgtwin`` does."""
import sys

from pgtwin.cli.entry import main

sys.exit(main())
