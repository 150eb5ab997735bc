"""dlpc-opt: xDSL's opt driver with dlpc's dialects, passes and targets registered.

    dlpc-opt model.mlir -p graph-infer-shapes,graph-to-te,te-to-loop

Everything `xdsl-opt` offers works (-p, -t, --split-input-file, --verify-diagnostics,
--print-between-passes, ...). Errors are one line on stderr with exit code 1.
"""

import sys

from xdsl.xdsl_opt_main import xDSLOptMain

from dlpc.diagnostics import ToolArgumentParser, run_guarded


class DlpcOptMain(xDSLOptMain):
    def __init__(self, args=None):
        super().__init__(description="dlpc modular optimizer driver", args=args)

    def register_all_arguments(self, arg_parser):
        super().register_all_arguments(arg_parser)
        # usage errors are one diagnostic line and exit code 1, as in dlpc and dlpc-run
        arg_parser.prog = "dlpc-opt"
        arg_parser.error = ToolArgumentParser.error.__get__(arg_parser)

    def register_all_dialects(self):
        super().register_all_dialects()  # upstream + dlpc, through the xdsl.universe entry point
        from dlpc.universe import DIALECTS

        for name, factory in DIALECTS.items():
            if name not in self.ctx.registered_dialect_names:
                self.ctx.register_dialect(name, factory)

    def register_all_passes(self):
        super().register_all_passes()
        from dlpc.universe import PASSES

        for name, factory in PASSES.items():
            self.register_pass(name, factory)

    def register_all_targets(self):
        super().register_all_targets()
        from dlpc.universe import TARGETS

        for name, factory in TARGETS.items():
            self.available_targets[name] = factory


def main(argv=None):
    return run_guarded(lambda: DlpcOptMain(args=argv).run(), tool="dlpc-opt")


if __name__ == "__main__":
    sys.exit(main())
