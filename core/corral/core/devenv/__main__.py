import sys

from corral.core.devenv.cli import main

sys.exit(main())
