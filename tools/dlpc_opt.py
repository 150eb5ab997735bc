"""dlpc-opt: xDSL's opt driver with dlpc's dialects, passes and targets registered.

    dlpc-opt model.mlir -p graph-infer-shapes,graph-to-te,te-to-loop
    dlpc --emit=graph m.dlpc | dlpc-opt - -p graph-to-te

Everything `xdsl-opt` offers works (-p, -t, --split-input-file, --verify-diagnostics,
--print-between-passes, ...). As `mlir-opt`, it reads IR from stdin when the file is `-`
or absent, and a file of any name as MLIR text (`-f` picks another registered frontend).
Errors are one line on stderr with exit code 1.
"""

import io
import os
import sys

from xdsl.xdsl_opt_main import xDSLOptMain

from dlpc.diagnostics import (
    ToolArgumentParser,
    boundary,
    dlpc_version,
    run_guarded,
    write_atomically,
    write_stdout,
)


class _Stdout:
    def write(self, text: str) -> int:
        write_stdout(text)
        return len(text)

    def flush(self) -> None:
        sys.stdout.flush()

    def close(self) -> None:  # xDSL closes its output stream; stdout stays open
        sys.stdout.flush()


class _Collected(io.StringIO):
    def close(self) -> None:  # xDSL closes its output stream; the text is read after
        pass


UPSTREAM_HELP = {
    "disable_verify": "do not verify the IR after parsing and after each pass",
    "version": "print the version of dlpc-opt (dlpc and xDSL) and exit",
}


class DlpcOptMain(xDSLOptMain):
    # what `--version` prints (xDSL fills in its version)
    version_format = f"dlpc-opt (dlpc {dlpc_version()}, xdsl {{xdsl_version}})"

    def __init__(self, args=None):
        super().__init__(description="dlpc modular optimizer driver", args=args)

    def register_all_arguments(self, arg_parser):
        super().register_all_arguments(arg_parser)
        arg_parser.add_argument(
            "--check-each-pass",
            action="store_true",
            help="run every function on seeded random inputs before and after each pass "
            "and stop at the first pass that changes a result (dlpc.passes.check)",
        )
        # usage errors are one diagnostic line and exit code 1, as in dlpc and dlpc-run
        arg_parser.prog = "dlpc-opt"
        arg_parser.error = ToolArgumentParser.error.__get__(arg_parser)
        for action in arg_parser._actions:  # xDSL leaves a few options undocumented
            if action.dest == "input_file":
                action.help = "IR file of any name (MLIR text); - or none reads stdin"
            if not action.help:
                action.help = UPSTREAM_HELP.get(action.dest, action.dest.replace("_", " "))

    def get_input_stream(self):
        """stdin for `-` (or no file); any other file is read whole, as MLIR text unless
        its extension names another registered frontend (mlir-opt reads any name)."""
        name = self.args.input_file
        if name in (None, "-"):
            return sys.stdin.buffer, "mlir"
        extension = os.path.splitext(name)[1].lstrip(".")
        f = open(name, "rb")  # noqa: SIM115 - closed by xDSL's run once parsed
        return f, extension if extension in self.available_frontends else "mlir"

    def prepare_output(self):
        """stdout through `write_stdout`, so a reader that goes away mid-output is seen;
        `-o FILE` is collected and written by `run` once complete (`write_atomically`: a
        device or FIFO in place, a regular file by rename; a full device is one line)."""
        if self.args.output_file is None:
            return _Stdout()
        self.collected = _Collected()
        return self.collected

    def run(self):
        super().run()
        if self.args.output_file is not None:
            write_atomically(self.args.output_file, self.collected.getvalue())

    def apply_passes(self, prog):
        """The passes in order, each (and the verification after it) inside
        `diagnostics.boundary`, so whatever escapes is one line naming the pass and the op
        (with --verify-diagnostics xDSL's diagnostics pass through, printed in full as
        xDSL does); with --check-each-pass, each one's results checked."""
        checker = None
        if self.args.check_each_pass:
            from dlpc.backends.runtime.evaluate import make_checker

            checker = make_checker()
            checker.start(prog)
        keep = self.args.verify_diagnostics
        callback = self.pipeline.callback
        assert callback is not None  # (xDSLOptMain's pipeline always has its callback)
        previous = None
        for p in (*self.pipeline.passes, None):
            stage = "the input" if previous is None else f"the output of pass {previous.name}"
            with boundary(f"verifying {stage}", keep_diagnostics=keep):
                callback(previous, prog, p)  # verifies, prints, times
            if checker and previous is not None:
                checker.after(previous.name, prog, previous)
            if p is None:
                break
            with boundary(f"pass {p.name}", keep_diagnostics=keep):
                p.apply(self.ctx, prog)
            previous = p
        for note in checker.notes if checker else ():
            print(f"dlpc-opt: note: --check-each-pass: {note}", file=sys.stderr)

    def parse_chunk(self, chunk, file_extension, start_offset=0):
        """xDSL's parse of one chunk, with a plain Python exception from inside the parser
        (malformed attributes such as `array<i0: ...>`) as one diagnostic."""
        from dlpc.passes.pipeline import parser_failures

        with parser_failures(self.get_input_name()):
            return super().parse_chunk(chunk, file_extension, start_offset)

    def get_input_name(self):
        name = self.args.input_file
        return "<stdin>" if name in (None, "-") else name

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
