"""The test suite verifies the IR after every pass, dlpc.compile's too (DLPC_VERIFY_EACH,
docs/pipeline.md#verification): a pass that leaves invalid IR fails its tests naming it."""

import os

os.environ.setdefault("DLPC_VERIFY_EACH", "1")
