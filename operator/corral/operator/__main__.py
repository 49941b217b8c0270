import sys

from corral.operator.main import main

sys.exit(main())
