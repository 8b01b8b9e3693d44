"""`python -m npu_zc ...` is the `npu-zc` command."""

import sys

from .cli import main

sys.exit(main())
