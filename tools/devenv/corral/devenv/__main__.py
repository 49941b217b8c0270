import sys

from corral.devenv.cli import main

sys.exit(main())
