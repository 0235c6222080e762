"""``python -m pgtwin`` runs the command line."""
import sys

from pgtwin.cli import main

sys.exit(main())
