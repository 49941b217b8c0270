import sys

from corral.apiserver.main import main

sys.exit(main())
