import sys

from kinemesh.cli import main

sys.exit(main())
