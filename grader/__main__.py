import sys

from grader.pipeline.cli import main

sys.exit(main())
