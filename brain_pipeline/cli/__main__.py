import sys

from brain_pipeline.cli import main

sys.exit(main())
