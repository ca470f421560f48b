import sys

from apibank_bench.cli import main

sys.exit(main())
