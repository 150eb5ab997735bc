# lit configuration: run from the repository root with `lit test -v`.
import os
import sys

import lit.formats

config.name = "dlpc"
# lit's ShTest, the usual RUN lines run inside lit's workers (test/litformat.py);
# `lit test -D inprocess=0` runs every line as commands
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "test"))
from litformat import InProcessShTest  # noqa: E402

if lit_config.params.get("inprocess", "1") == "0":
    config.test_format = lit.formats.ShTest(preamble_commands=[])
else:
    config.test_format = InProcessShTest(preamble_commands=[])
config.suffixes = [".mlir", ".dlpc", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.excludes = ["python", "Inputs", "Output", "examples", "docs", "bench", "build"]
config.environment["PYTHONHASHSEED"] = "0"
# PYTHONPATH: a checkout run without installing it (bench/mutation.py's copies) is the dlpc
# that dlpc-opt in the RUN lines imports
for var in ("PATH", "HOME", "CI", "DLPC_CACHE_DIR", "CC", "VIRTUAL_ENV", "PYTHONPATH"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
config.substitutions.append(("%examples", os.path.join(os.path.dirname(__file__), "examples")))
