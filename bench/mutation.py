"""Mutation testing of dlpc with cosmic-ray (issue 18), per area with its own test subset.

    pip install -e '.[mutation]'                                   # cosmic-ray 8.7.0
    python bench/mutation.py --area graph-rewrites --sample 40     # one area, 40 mutants
    python bench/mutation.py --area all --sample 30                # every area
    python bench/mutation.py --report                              # the table so far
    python bench/mutation.py --area comm --recheck 'CMD'           # survivors vs CMD
    python bench/mutation.py --area comm --retime 1200             # timed-out mutants again

Each area is a set of modules and the tests that should catch their bugs (AREAS below).
The run works on a copy of the committed tree (`git archive HEAD`) under --workdir, never
on the checkout: cosmic-ray rewrites the module on disk for each mutant, runs the area's
test command with `PYTHONPATH` pointing at the copy, and restores it. A mutant the tests
fail on (or time out on) is killed; one they pass on survived. A run refuses to start
when the unmutated tests take over half the per-mutant timeout (a slow mutant would count
as killed), and --retime runs the timed-out mutants' tests again with more time. With
--sample N only N mutants per area, drawn with --seed, are run (an area has hundreds;
each costs one run of its tests); mutants inside annotations Python never evaluates (a signature's
`int | None` under `from __future__ import annotations`) are dropped before sampling,
equivalent by construction. The score is killed / (killed + survived); the survivors'
diffs are printed, to be given a test or shown equivalent (docs/testing.md). Slow: not
in CI.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import fnmatch
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]

PYTEST = "python -m pytest -x -q -p no:cacheprovider"
FAST = "-x -q -p no:cacheprovider"


class Area(NamedTuple):
    """Modules (globs, resolved in the copy), lit files and pytest arguments (all must pass;
    the first pytest arguments run in the lit runner's process), seconds per mutant."""

    modules: list[str]
    lit: list[str]
    pytest: list[str]
    timeout: float = 120.0  # a mutant that runs past it (loops forever) counts as killed


def _api_tests(own: str) -> list[str]:
    """The tests of the api and train-tune-builder areas (compile/load/lower/call, the
    knobs, the pass table, the tuning space, the trainer), with the area's own file."""
    return [
        "test/python/test_mutation_kills_api4.py test/python/test_mutation_kills_api5.py "
        f"test/python/test_mutation_kills_api6.py {own} "
        "test/python/test_api.py test/python/test_settings.py test/python/test_registry.py "
        "test/python/test_tuner_space.py test/python/test_train_compile.py "
        "test/python/test_check_each_pass.py test/python/test_frontend.py "
        "test/python/test_frontend_messages.py -k 'not resnet and not examples_pass "
        "and not dlp_lowering_passes and not lit_inputs and not tile_point'",
        # the trainer's step, save and resume; the tuning log and the tuner's driver;
        # models compiled per value of a shape input (Model.specialiser)
        "test/python/test_train.py test/python/test_tuner.py test/python/test_onnx_api.py "
        "-k 'errors_are_one_line or named_batch_dim or bit_identical or best_ranks "
        "or log_refuses or signature_ignores or resumes_from or reports_a_missing "
        "or rejects_a_bad or specialised or slice_bounds or empty_optional'",
    ]


AREAS: dict[str, Area] = {
    "frontends-text": Area(
        ["frontends/text/irgen.py", "frontends/text/parser.py", "frontends/text/__init__.py"],
        [],
        [
            "test/python/test_frontend.py test/python/test_frontend_messages.py "
            "test/python/test_wrong_answers.py -k 'literal or tensor_operands or frontend'",
            "test/python/test_differential.py -k literal",
            "test/python/test_mutation_kills_graph.py -k 'end_of_file or dimension or nesting or shadow "
            "or variadic or built_string'",
            "test/python/test_mutation_kills_text8.py",  # (load_model's weights and bindings)
        ],
    ),
    "graph-rewrites": Area(
        ["passes/graph/simplify.py", "passes/graph/substitute.py"],
        ["test/passes/graph-simplify.mlir", "test/passes/graph-substitute.mlir"],
        [
            "test/python/test_graph_passes.py test/python/test_wrong_answers.py "
            "-k 'not onnx and not nan and not literal and not tensor_operands'",
            "test/python/test_mutation_kills_graph.py",
        ],
    ),
    "lowering": Area(
        ["passes/lower/graph_to_te.py"],
        ["test/passes/graph-to-te.mlir", "test/passes/graph-to-te-nhwc.mlir"],
        [
            # all of test_graph_to_te (the -k below selected 6 of its 225 tests)
            "test/python/test_graph_to_te.py test/python/test_mutation_kills_graph.py "
            "test/python/test_mutation_kills_lowering3.py "
            "test/python/test_mutation_kills_lowering4.py",  # (bit ops, bitcast, hoisted sums)
            "test/python/test_wrong_answers.py -k 'lowering or ceil_mode'",
            # the dropout mask drawn by graph-to-te's integer hash on the te evaluator
            "test/python/test_dropout.py -k te_evaluator",
        ],
    ),
    "fold-constants": Area(
        ["passes/graph/fold_constants.py"],
        ["test/passes/graph-fold-constants.mlir"],
        ["test/python/test_graph_passes.py test/python/test_fold_limits.py"],
    ),
    # issue 35: every other part of the tree, each with a fast subset of its tests
    "dialects": Area(
        [
            "dialects/graph.py",
            "dialects/__init__.py",
            "dialects/te.py",
            "dialects/loop.py",
            "dialects/dlp.py",
            "dialects/typed.py",
            "dialects/sizes.py",
            "dialects/xdsl_fixes.py",
        ],
        [
            "test/dialects/graph",
            "test/dialects/te",
            "test/dialects/loop",
            "test/dialects/dlp",
            "test/passes/graph-infer-shapes.mlir",
            "test/passes/graph-infer-shapes-invalid.mlir",
            "test/e2e/size-limit.test",  # (xdsl_fixes: a splat literal's type checked first)
        ],
        [  # the graph ops' shapes and properties as the lowering and the frontends read them
            "test/python/test_mutation_kills_dialects.py test/python/test_graph_props.py "
            "test/python/test_graph_to_te.py "
            # the quantized ops' verifiers, unsigned constants and casts, verify_ir (issue 35, 7th)
            "test/python/test_mutation_kills_dialects5.py "
            # seed 49's survivors hidden by its timeout (issue 35, 8th)
            "test/python/test_mutation_kills_dialects6.py "
            # the whole modules' defaults, shape rules and diagnostics (issue 35, 9th)
            "test/python/test_mutation_kills_dialects7.py",
            # xdsl_fixes: the linear string-literal pattern and an unterminated string
            "test/python/test_untrusted_input.py -k 'xdsl_string or linear_string or unterminated'",
        ],
        timeout=300.0,  # (the unmutated tests took 93 s at a load of 6-8 on 2 cores, seed 50)
    ),
    "schedule": Area(
        ["passes/schedule/*.py"],
        [
            f"test/passes/loop-{p}.mlir"
            for p in (
                "split",
                "split-invalid",
                "tile",
                "tile-invalid",
                "reorder",
                "reorder-invalid",
                "fuse",
                "fuse-invalid",
                "parallel",
                "parallel-invalid",
                "unroll",
                "unroll-invalid",
                "vectorize",
                "vectorize-invalid",
                "compute-at",
                "compute-at-invalid",
                "cache-read",
                "cache-read-invalid",
                "cache-write",
                "cache-write-invalid",
                "rfactor",
                "rfactor-invalid",
                "decompose-reduction",
                "decompose-reduction-invalid",
                "tensorize",
                "tensorize-invalid",
                "fold-init-epilogue",
                "fold-init-epilogue-invalid",
                "default-schedule",
                "default-schedule-invalid",
                "schedule",
                "schedule-invalid",
                "cache-read-deinterleave",
                "cache-read-deinterleave-invalid",
                "cache-read-padded",
                "compute-at-local",
                "compute-at-reshape",
                "compute-at-dealloc",
                "default-schedule-conv",
                "compute-inline",
                "compute-inline-invalid",
                "apply-tuning-log",
                "apply-tuning-log-invalid",
                "decompose-reduction-nest",
                "fold-init-epilogue-nested",
                "fold-init-epilogue-sums",
                "slide-rows",
                "slide-rows-invalid",
                "tensorize-slide",
                "tensorize-slide-invalid",
                "cache-write-symbolic",
                "decompose-reduction-sums",
                "tensorize-symbolic",
            )  # fmt: skip
        ],
        [  # all of test_schedule (5 s of CPU), the nest analysis and the schedule scripts
            "test/python/test_mutation_kills_schedule.py "
            "test/python/test_mutation_kills_schedule2.py test/python/test_mutation_kills_schedule3.py "
            "test/python/test_mutation_kills_schedule4.py test/python/test_mutation_kills_schedule5.py "
            "test/python/test_schedule.py "
            "test/python/test_nest.py test/python/test_schedule_script.py",
            # slide.py's vector code and the scalar nest beside it, on the C target (16
            # cached compiles); int_conv.py's template against the numpy target
            "test/python/test_depthwise_schedules.py -k sliding",
            "test/python/test_int_conv.py",
            # the tuning log (passes/schedule/tuning_log.py): records written and read back
            "test/python/test_tuner.py -k 'best_ranks or log_refuses or log_keeps "
            "or signature_ignores'",
        ],
        timeout=420.0,  # (a passing run took 210 s at a load of 9 on 2 cores, C compiles cold)
    ),
    "dlp-lowering": Area(
        [
            "passes/lower/loop_to_dlp.py",
            "passes/lower/_dlp_*.py",
            "passes/lower/dlp_pack_params.py",
            "passes/lower/*dlp*/*.py",
        ],
        ["test/passes/loop-to-dlp*.mlir", "test/passes/dlp-pack-params*.mlir"],
        [  # test_dlp and each pattern family's test (dlp_select), the resnet example left out
            "test/python/test_mutation_kills_dlp.py test/python/test_mutation_kills_dlplowering3.py "
            "test/python/test_mutation_kills_dlplowering4.py "
            "test/python/test_dlp.py "
            "test/python/test_dlp_select_elementwise.py test/python/test_dlp_select_reduce.py "
            "test/python/test_dlp_select_window.py test/python/test_dlp_roofline.py "
            "test/python/test_dlp_select_permute.py test/python/test_dlp_fuse.py "
            "-k 'not resnet and not lenet and not description and not report and not checks'",
            # the packed small params (dlp-pack-params)
            "test/python/test_dlp_pack.py",
            # the attention fold, bands, columns, async copies, the estimate; pinned corners
            "test/python/test_dlp_attn.py test/python/test_dlp_bands.py "
            "test/python/test_dlp_columns.py test/python/test_dlp_async.py "
            "test/python/test_dlp_estimate.py test/python/test_mutation_kills_dlplowering5.py "
            # (6: the window matcher's refusals, the fold's reader / fits, the plans' figures;
            # 7: two per-row values combined, refused)
            "test/python/test_mutation_kills_dlplowering6.py "
            "test/python/test_mutation_kills_dlplowering7.py",
        ],
        timeout=600.0,  # (a passing run: about 4 minutes at a load of 10 on 2 cores)
    ),
    "dlp-c-sim": Area(
        ["backends/dlp_c.py", "backends/runtime/dlp_sim.py"],
        ["test/e2e/emit-dlp-c.mlir"],
        [  # as dlp-lowering, with the report and checks and the DLP rows of test_ieee
            "test/python/test_mutation_kills_dlp.py test/python/test_dlp.py "
            "test/python/test_dlp_select_elementwise.py test/python/test_dlp_select_reduce.py "
            "test/python/test_dlp_select_window.py test/python/test_ieee.py "
            "test/python/test_mutation_kills_dlpcsim3.py "
            "-k 'not resnet and not description and not opencl and not c-O'",
            # the async copies' queue (dma_hidden), the strided copy, the fused header
            "test/python/test_dlp_async.py test/python/test_mutation_kills_dlpcsim5.py",
        ],
    ),
    "c-backend": Area(
        ["backends/c.py"],
        ["test/e2e/emit-c.mlir", "test/e2e/emit-c-simd.mlir", "test/e2e/emit-c-names.mlir"],
        [  # all of test_c_backend, the C rows of test_ieee and test_c_units (no resnet)
            "test/python/test_mutation_kills_c.py test/python/test_mutation_kills_c2.py "
            "test/python/test_c_backend.py test/python/test_ieee.py test/python/test_c_units.py "
            "-k 'not opencl and not dlp and not resnet'"
        ],
    ),
    "opencl": Area(
        ["backends/opencl/*.py"],
        ["test/e2e/emit-opencl*"],
        [
            "test/python/test_mutation_kills_opencl.py test/python/test_mutation_kills_opencl3.py "
            "test/python/test_mutation_kills_opencl4.py "
            "test/python/test_opencl.py test/python/test_opencl_depthwise.py "
            "-k 'mutation or lanes or masked or integer_pow or ndrange or independent "
            "or padded_convs or padding_guards or batched or transposed or chain or local_cache "
            "or uninitialized or relayout_plan or copy_kernels_become or reshape_kernel_is "
            "or double_precision or erf_is_within or f64_erf or keeps_its_plan or clampable "
            "or blocks_short or border_tiles'",
            "test/python/test_opencl_winograd.py",
            # the GPU launch plans' shapes (gpu_launch.py), without running the examples
            "test/python/test_opencl_gpu_plans.py -k 'shapes or splits or collapses "
            "or group_shape'",
            # a padding guard's product of loop variables, the NDRange's three loops (8th round)
            "test/python/test_mutation_kills_opencl5.py",
            # (9th round) the programs of small models and test/e2e's nests under every plan
            "test/python/test_mutation_kills_opencl6.py",
        ],
        timeout=180.0,
    ),
    "train": Area(
        ["passes/train/*.py"],
        [
            "test/passes/graph-autodiff.mlir",
            "test/passes/graph-autodiff-invalid.mlir",
            # the gradients of graph.if / graph.loop (_control_grad.py)
            "test/passes/graph-autodiff-control-flow.mlir",
            "test/passes/graph-autodiff-control-flow-invalid.mlir",
        ],
        [
            "test/python/test_mutation_kills_train.py test/python/test_autodiff.py "
            "test/python/test_mutation_kills_train5.py "
            "-k 'mutation or rule_matches or every_differentiable or ties or fused_body "
            "or unused_param or result_and_aux'",
            "test/python/test_train_sched.py",
            # the losses against torch (numpy backend), the step's signature, the optimizers'
            # schedules against torch, LARS (with excluded params) against its formula
            "test/python/test_losses.py test/python/test_step.py test/python/test_optim.py "
            "test/python/test_train_lars.py -k 'numpy or other_losses or test_step or test_optim "
            "or lars_exclude or lars_momentum'",
            "test/python/test_control_flow.py -k 'grad or autodiff or train'",
            # numpy_loss of every kind, class-weighted losses and their gradients, the running
            # statistics and the closed-form batch-norm pattern against torch (eighth round)
            "test/python/test_mutation_kills_train6.py",
            # each optimizer's update against torch or its formula, the schedules' rates,
            # the comm gradients' exact IR, autodiff's diagnostics and recompute (9th round)
            "test/python/test_mutation_kills_train7.py",
        ],
    ),
    "onnx": Area(
        ["frontends/onnx*.py", "frontends/onnx_ops/*.py"],
        [],
        [
            "test/python/test_onnx_import.py test/python/test_mutation_kills_onnx.py "
            "test/python/test_mutation_kills_onnx3.py test/python/test_mutation_kills_onnx4.py "
            "test/python/test_mutation_kills_onnx6.py test/python/test_mutation_kills_onnx7.py",
            # the public API's ONNX cases (3-D conv and pool, weights as inputs) and the
            # control-flow ops (If, Loop, Scan) on both targets, with the ONNX cases of the
            # control-flow area's tests (every test of the first two has onnx in its name)
            "test/python/test_onnx_api.py test/python/test_control_flow_onnx.py "
            "test/python/test_mutation_kills_controlflow3.py "
            # (not if_seq / if_opt: both fail at HEAD 289fa2d, 'ndarray, expected list')
            "-k 'not torchscript and not conformance_if and onnx and not if_seq "
            "and not if_opt'",
            # the #34 handlers (math_ops, scan_ops, linalg, bitwise) on numpy against
            # onnxruntime (~15 s)
            "test/python/test_onnx_math_scan.py test/python/test_onnx_math.py "
            "test/python/test_ops_int.py -k 'numpy and (onnxruntime or follow_onnx) "
            "or specialised or refused or half_to_even'",
            # onnx's own node tests, on numpy, of the operators whose import is index
            # arithmetic, and of the recurrent, indexing, quantization and vision handlers
            # (~25 s of CPU)
            "test/python/test_onnx_conformance.py -k 'test_numpy and (resize or pool or conv "
            "or gather or concat or depth or space or pad or slice or split or tile or trilu "
            "or lstm or gru or rnn or scatter or topk or quantize or integer or qlinear "
            "or lrn or col2im or gridsample or deform or nonzero or onehot or reversesequence "
            "or compress or unique or nonmaxsuppression)'",
        ],
        timeout=600.0,
    ),
    "reference": Area(
        ["reference/graph.py", "reference/te.py", "backends/numpy.py"],
        [],
        [
            "test/python/test_numpy_backend.py test/python/test_mutation_kills_reference.py "
            "test/python/test_mutation_kills_reference2.py "
            "test/python/test_mutation_kills_dialects.py test/python/test_reference_memory.py "
            "test/python/test_graph_to_te.py",  # te evaluator against the graph reference
            # the dropout mask's hash (pcg_hash) and the te evaluator's mask; graph.if and
            # graph.loop on the reference and the numpy backend
            "test/python/test_dropout.py test/python/test_control_flow.py "
            "-k 'pcg_hash or te_evaluator or reference_and_numpy'",
            # the numpy program's symbolic dims (backends/numpy.py's bind_dims)
            "test/python/test_dynamic_speedpaths.py -k numpy_program_binds",
        ],
    ),
    "comm": Area(
        ["dialects/comm.py", "reference/comm.py", "passes/dist/*.py"],
        [
            "test/dialects/comm",
            "test/passes/comm-*.mlir",
            "test/passes/graph-*-comm*.mlir",
            "test/passes/graph-data-parallel*.mlir",
            "test/passes/graph-tensor-parallel*.mlir",
            "test/passes/graph-pipeline*.mlir",
        ],
        [
            "test/python/test_mutation_kills_comm.py test/python/test_mutation_kills_comm2.py "
            "test/python/test_dist.py test/python/test_dist_pipeline_2bw.py "
            "test/python/test_dist_tp_heads.py test/python/test_comm_mpi.py -k 'mutation "
            "or deadlock or not_plain or do_not_divide or shard_is_disjoint or textbook "
            "or shapes_and_roots'",
            # under mpiexec (2 and 4 ranks): the collectives, comm ops in a program, their
            # gradients, tensor-parallel, pipeline and parameter-server steps vs one device
            "test/python/test_comm_mpi.py -k 'collectives_match_reference and 2 "
            "or numpy_program and 2 or gradient_rules'",
            "test/python/test_dist.py -k 'tensor_parallel_equals and sgd "
            "or pipeline_stages_equal and gpipe-4 or parameter_server_equals'",
        ],
        timeout=240.0,
    ),
    "tools": Area(
        ["tools/*.py", "diagnostics.py"],
        ["test/e2e/tool-bad-options.mlir", "test/e2e/tool-dlpc-opt-invalid.mlir"],
        [
            "test/python/test_mutation_kills_tools.py test/python/test_tools.py "
            "-k 'mutation or bad_options or diagnostics or difference or invalid or failure "
            "or atomically or output_file'",
            "test/python/test_mutation_kills_tools2.py test/python/test_mutation_kills_tools3.py "
            "test/python/test_mutation_kills_tools4.py",
            # (session 8) dlpc-run / dlpc-tune on a symbolic model, dlpc --stats' scalar dlp
            # kernels, dlpc-run on OpenCL with its launch plans
            "test/python/test_dlpc_symbolic.py test/python/test_dlp_roofline.py "
            "test/python/test_opencl_gpu_plans.py -k 'dlpc_run or dlpc_tune or stats_names'",
            # the tools' in-process CLI tests, and one dlpc-tune and dlpc-train run each
            "test/python/test_cli_newcomer.py -k 'version or usage or has_help or checks_options "
            "or missing_tuning or verdict or never_overwrites or extra_file or symlink "
            "or any_name or device or umask'",
            "test/python/test_tuner.py test/python/test_train.py -k 'dlpc_tune or dlpc_train "
            "or log_ or best_ranks or resumes'",
        ],
        # the unmutated tests take 48 s at load 5-7 and 136 s at load ~9 (session 8)
        timeout=300.0,
    ),
    # the rooms that landed in the second round (issues 29 and 30): the device runtime, the
    # eager layer above it, control flow through every layer, symbolic dims
    "runtime": Area(
        ["runtime/allocator.py", "runtime/device.py", "runtime/tensor.py"],
        [],
        [  # devices, streams, events, views and the caching allocator on cpu, dlp:0, opencl:0
            "test/python/test_runtime.py test/python/test_mutation_kills_runtime3.py",
            "test/python/test_eager.py -k 'views or operators_and_methods'",
        ],
    ),
    "eager": Area(
        ["eager/*.py", "runtime/device_call.py"],  # (device_call: what eager kernels run through)
        [],
        [  # every op against the reference, grads and optimizers against torch, jit vs eager
            "test/python/test_eager.py test/python/test_mutation_kills_eager3.py "
            "test/python/test_mutation_kills_eager4.py test/python/test_mutation_kills_eager5.py "
            "test/python/test_mutation_kills_eager6.py",
            # placed models and eager OpenCL chains: binding, copies, pools (~3 s of CPU)
            "test/python/test_eager_device.py",
        ],
        timeout=240.0,
    ),
    "control-flow": Area(
        [
            "passes/lower/_control_to_loop.py",
            "passes/train/_control_grad.py",
            "frontends/onnx_ops/control.py",
        ],
        [
            "test/passes/te-to-loop-control-flow.mlir",
            "test/passes/te-to-loop-control-flow-invalid.mlir",
            "test/passes/graph-autodiff-control-flow.mlir",
            "test/passes/graph-autodiff-control-flow-invalid.mlir",
            "test/dialects/graph/control-flow.mlir",
            "test/dialects/graph/control-flow-invalid.mlir",
        ],
        [  # graph.if / graph.loop on the reference, numpy and C, their gradients, ONNX If/Loop/Scan
            "test/python/test_control_flow.py test/python/test_mutation_kills_controlflow3.py",
            # (onnx's test_if, 18 s of CPU, left out: the If import has its own tests)
            "test/python/test_control_flow_onnx.py -k 'not torchscript and not conformance_if'",
        ],
        timeout=240.0,
    ),
    "dynamic": Area(
        [
            "dialects/symdims.py",
            "passes/graph/bind_dims.py",
            "passes/graph/mask_padding.py",
            "frontends/onnx_symbolic.py",
            "runtime/dynamic.py",
            # one compile over runtime extents (issue 29)
            "passes/lower/_symbolic.py",
            "passes/lower/runtime_extents.py",
        ],
        [
            "test/passes/loop-runtime-extents*.mlir",
            "test/passes/graph-bind-dims.mlir",
            "test/passes/graph-bind-dims-invalid.mlir",
            "test/passes/graph-mask-padding.mlir",
            "test/passes/graph-mask-padding-invalid.mlir",
            "test/passes/graph-infer-shapes-symbolic-invalid.mlir",
        ],
        [  # dynamic-axes exports vs onnxruntime, buckets, bad shapes, per-shape fallback
            "test/python/test_dynamic.py test/python/test_mutation_kills_dynamic3.py "
            "test/python/test_dynamic_symbolic.py test/python/test_mutation_kills_dynamic4.py "
            # (runtime-extents' versions, short=, the fallbacks) and short= vs numpy
            "test/python/test_mutation_kills_dynamic5.py test/python/test_dynamic_short.py",
        ],
        timeout=240.0,
    ),
    # issue 35, fourth round: the public API and the drivers above the passes. Split in
    # session 7 from the trainer, the tuner and the Python builder (one area of ~5,000 lines
    # before): each half is sampled on its own, so each gets 30 mutants of its own lines.
    "api": Area(
        [
            "__init__.py",
            "api.py",
            "model.py",
            "settings.py",
            "__main__.py",
            "universe.py",
            "passes/pipeline.py",
            "passes/registry.py",
            "passes/check.py",
            "frontends/text/__main__.py",
        ],
        [],
        _api_tests(
            "test/python/test_mutation_kills_api7.py test/python/test_mutation_kills_api8.py"
        ),
        timeout=180.0,
    ),
    # the trainer, the auto-tuner's space / search / measurement and the Python builder;
    # guarded by the same tests as api (they compile through it)
    "train-tune-builder": Area(
        [
            "train.py",
            "frontends/builder.py",
            "frontends/text/ast.py",
            "tune/*.py",
        ],
        [],
        _api_tests("test/python/test_mutation_kills_ttb1.py"),
        timeout=180.0,
    ),
    # session 7: modules that were in no area. QDQ models' integer kernels and the
    # quantization ops' lowering
    "quant": Area(
        ["passes/graph/qdq.py", "passes/lower/quant_to_te.py"],
        [
            "test/passes/graph-fold-qdq.mlir",
            "test/passes/graph-fold-qdq-invalid.mlir",
            "test/passes/quant-to-te.mlir",
        ],
        [
            "test/python/test_mutation_kills_quant1.py test/python/test_quantized.py "
            "test/python/test_int_conv.py",
            "test/python/test_ops_c.py test/python/test_eager_ops.py -k 'quantize or integer'",
        ],
        timeout=240.0,
    ),
    # compiled-shape copies: the batch run chunk after chunk (rebatch) and the kernel
    # copies for short runtime extents (loop-short-extents, issue 29)
    "batch-extents": Area(
        ["passes/graph/rebatch.py", "passes/lower/short_extents.py"],
        ["test/passes/loop-short-extents.mlir", "test/passes/loop-short-extents-invalid.mlir"],
        [
            "test/python/test_mutation_kills_batchext1.py test/python/test_rebatch.py "
            "test/python/test_dynamic_short.py",
        ],
        timeout=240.0,
    ),
    # the comm runtime (one compiled program cut at its comm ops, the C driver, mpi4py) and
    # the distributed trainers: single-process checks, then two short 2-rank runs
    "comm-runtime": Area(
        [
            "runtime/comm_native.py",
            "runtime/comm_split.py",
            "runtime/mpi.py",
            "backends/c_comm.py",
            "dist/*.py",
        ],
        [],
        [
            "test/python/test_mutation_kills_commrt4.py test/python/test_mutation_kills_commrt5.py "
            "test/python/test_dist.py test/python/test_comm_c.py "
            "test/python/test_dist_pipeline_2bw.py -k 'mutation "
            "or shard_is_disjoint or do_not_divide or emit_prints or driver_printer "
            "or another_compiled or deadlock or not_plain'",
            # under mpiexec, 2 ranks (hybrid: 4), ~70 s in all at load 17: every collective
            # on the C driver and through mpi4py, a program and a data-parallel step on C,
            # then each trainer against one device
            "test/python/test_comm_c.py -k 'every_collective_on_c and 2 "
            "or collectives_on_c_equals or data_parallel_on_c'",
            "test/python/test_dist.py -k 'tensor_parallel_equals and sgd "
            "or pipeline_stages_equal and gpipe-2 or parameter_server_equals "
            "or pipeline_training_equals and gpipe-sgd or hybrid_dp_x_tp'",
            "test/python/test_dist_ps_async.py -k staleness",
        ],
        timeout=240.0,
    ),
    # issue 35, fourth round (mut-e): the other graph passes, te-to-loop and the loop-level
    # passes, the compiled functions' runtime
    "graph-passes": Area(
        [
            "passes/graph/canonicalize.py",
            "passes/graph/fuse.py",
            "passes/graph/layout.py",
            "passes/graph/conv_layout.py",
            "passes/graph/winograd.py",
            "passes/graph/infer_shapes.py",
            "passes/graph/_util.py",
            "passes/graph/_layout_rewrite.py",
        ],
        [
            f"test/passes/graph-{p}{s}.mlir"
            for p in ("canonicalize", "fuse", "layout", "conv-layout", "winograd", "infer-shapes")
            for s in ("", "-invalid")
        ],
        [  # each pass on small graphs against the reference, without the resnet examples
            "test/python/test_mutation_kills_graphpasses4.py test/python/test_graph_passes.py "
            "test/python/test_winograd.py test/python/test_layout_e2e.py "
            "-k 'not resnet and not other_targets and not training_step'",
        ],
        timeout=180.0,
    ),
    "loop-passes": Area(
        [
            "passes/lower/te_to_loop.py",
            "passes/lower/te_inline.py",
            "passes/lower/_te_builder.py",
            "passes/lower/memory_plan.py",
            "passes/lower/prepack.py",
            "passes/lower/view_copies.py",
            "passes/lower/opencl_winograd.py",
            "passes/lower/dlp_reshape_aliases.py",
        ],
        [
            f"test/passes/{p}{s}.mlir"
            for p in (
                "te-to-loop",
                "te-inline",
                "loop-memory-plan",
                "loop-views",
                "loop-prepack-weights",
                "loop-view-copies",
                "loop-opencl-winograd",
                "dlp-reshape-aliases",
            )
            for s in ("", "-invalid")
        ]
        + ["test/e2e/emit-opencl-winograd.test"],
        [  # te-to-loop in C against numpy, the plans' soundness, prepacked weights (small
            # models only: a mutant that changes the C recompiles every library, ~9 s of CPU)
            "test/python/test_mutation_kills_looppasses4.py test/python/test_memory_plan.py "
            "test/python/test_mutation_kills_looppasses5.py test/python/test_ops_c.py "
            "test/python/test_mutation_kills_dynamic4.py "  # (te-to-loop's symbolic guards)
            "test/python/test_mutation_kills_looppasses6.py "
            # (graph-to-te's helpers here, _te_builder and te_inline: on the te evaluator)
            "test/python/test_graph_to_te.py test/python/test_mutation_kills_lowering3.py "
            "test/python/test_prepack.py test/python/test_opencl_winograd.py -k 'looppasses4 "
            "or looppasses5 or looppasses6 or graph_to_te or (lowering3 and (nhwc or pool "
            "or conv)) or (ops_c and (test_family or fused_ops or returned_inputs)) "
            "or dynamic4 "
            "or (memory_plan and not resnet and not batch_32 and not random_graphs "
            "and not every_example and not two_threads and not placement_never) "
            "or (prepack and (mlp or packing_runs_once or gemm_weights)) "
            "or fused_conv_matches or fused_without_relu'",
        ],
        timeout=300.0,  # (a passing run takes 80 s at a load of 20 on 2 cores)
    ),
    "backend-runtime": Area(
        [
            "backends/runtime/cbuild.py",
            "backends/runtime/artifact.py",
            "backends/runtime/callconv.py",
            "backends/runtime/evaluate.py",
            "backends/runtime/profile.py",
            "backends/runtime/opencl_rt.py",
            "backends/runtime/fastcall.py",  # (the C call and the batch's chunks, session 5)
            "backends/runtime/chunks.py",
            "backends/names.py",
            "targets/dlp.py",
        ],
        [],
        [  # the build cache, the calling convention, profiles, names (no CLI subprocesses)
            "test/python/test_mutation_kills_backendrt4.py test/python/test_callconv.py "
            "test/python/test_build_cache.py test/python/test_hostile_names.py "
            "test/python/test_mutation_kills_bkrt5.py test/python/test_fastcall.py "
            "test/python/test_mutation_kills_bkrt6.py "
            "test/python/test_profile.py -k 'backendrt4 or bkrt5 or bkrt6 or fastcall or callconv "
            "or garbage_library or missing_hash or (matrix and mlir and not dlp]) "
            "or (test_profile and not dlpc_run and not openmp and not timing)'",
            # OpenCLFunction on PoCL: buffers, aliases, SVM outputs, resident params; the
            # host's control flow (graph.if / graph.loop: `_host_flow`, `_enqueue`) and its
            # profile (~2 s of CPU)
            "test/python/test_opencl.py test/python/test_control_flow.py "
            "-k 'uninitialized or wrong_shape or reshape_kernel_is "
            "or build_failure or svm or resident_params or example_matches_reference and None-mlp "
            "or opencl and compiled_against_reference or opencl_profile_counts "
            # the plan as data, chains on the serial device, relaid weights, the profile
            "or profile_rows or weights_read_transposed or consecutive_kernels "
            "or chain_is_cut or split_chain or plan_is_data or ndrange_and_single'",
            # teams of two serial devices (Team, the helper's launches; ~7 s of CPU)
            "test/python/test_opencl_team.py",
        ],
        timeout=300.0,  # (at a load of 20 on 2 cores)
    ),
}


def commands(area: Area, copy: Path) -> list[str]:
    """The area's test commands in the copy: its lit files and first pytest arguments in
    one process (bench/fastlit.py), the other pytest arguments each in its own."""
    pytests = [a for a in (present(copy, a) for a in area.pytest) if a]
    first = f" --pytest {FAST} {pytests.pop(0)}" if pytests else ""
    lit = [f for f in area.lit if "*" in f or (copy / f).exists()]
    out = [f"python bench/fastlit.py {' '.join(lit)}{first}"] if lit or first else []
    return out + [f"{PYTEST} {a}" for a in pytests]


def resolve(copy: Path, patterns: list[str]) -> list[str]:
    """The modules the patterns name in the copy (a file moved into a package: both forms);
    an `__init__.py` only where a pattern names it, not through a wildcard."""
    found = {
        str(f.relative_to(copy))
        for p in patterns
        for f in copy.glob(p)
        if f.is_file() and (f.name != "__init__.py" or p.endswith("__init__.py"))
    }
    return sorted(m for m in found if m.endswith(".py"))


def present(copy: Path, command: str) -> str | None:
    """pytest arguments without the test files the copy lacks (test_mutation_kills_* not
    written yet); None when no test file is left (pytest would collect the whole suite)."""
    words = [
        w
        for w in command.split(" ")
        if not (w.startswith("test/") and "*" not in w and not (copy / w).exists())
    ]
    return " ".join(words) if any(w.startswith("test/") for w in words) else None


def unevaluated_annotations(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(start, end) (row from 1, column from 0, as cosmic-ray counts) of the annotations
    Python never evaluates: a function's parameter and return annotations and a
    module-level variable's under `from __future__ import annotations`, and a local
    variable's annotation in a function body. Class-level annotations are left alone
    (xDSL and dataclasses read them)."""
    tree = ast.parse(source)
    future = any(
        isinstance(n, ast.ImportFrom)
        and n.module == "__future__"
        and any(a.name == "annotations" for a in n.names)
        for n in tree.body
    )
    found: list[ast.expr] = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if future:
            args = fn.args
            every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
            found += [a.annotation for a in every if a is not None and a.annotation]
            found += [fn.returns] if fn.returns else []
        found += [n.annotation for n in ast.walk(fn) if isinstance(n, ast.AnnAssign)]
    if future:  # module level (also under if / try), not inside a class or function
        todo: list[ast.AST] = [tree]
        while todo:
            node = todo.pop()
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.AnnAssign):
                    found.append(child.annotation)
                elif not isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                    todo.append(child)
    return [
        ((a.lineno, a.col_offset), (a.end_lineno or a.lineno, a.end_col_offset or 0)) for a in found
    ]


def drop_annotation_mutants(db: sqlite3.Connection, copy: Path) -> int:
    """Deletes the mutants inside annotations Python never evaluates (equivalent by
    construction: `int | None` -> `int // None` in a signature); how many."""
    spans: dict[str, list] = {}
    drop = []
    rows = db.execute(
        "select job_id, module_path, start_pos_row, start_pos_col from mutation_specs"
    )
    for job, module, row, col in rows.fetchall():
        if module not in spans:  # module_path is dlpc/<path in the copy>
            spans[module] = unevaluated_annotations((copy / module.split("/", 1)[1]).read_text())
        if any(a <= (row, col) < b for a, b in spans[module]):
            drop.append((job,))
    db.executemany("delete from mutation_specs where job_id = ?", drop)
    db.executemany("delete from work_items where job_id = ?", drop)
    db.commit()
    return len(drop)


OWN_TESTS = ["test/python/test_mutation_kills_*.py", "test/dialects/*/invalid-mutation*.mlir"]


def prepare(
    area: str, workdir: Path, sample: int | None, seed: int, timeout: float, rev: str = "HEAD"
) -> Path:
    """A copy of `rev`, the cosmic-ray config and session (sampled); the session path.
    The tests written against mutants (OWN_TESTS) come from HEAD whatever `rev` is."""
    patterns = AREAS[area].modules
    base = workdir / area
    copy = base / "dlpc"
    if copy.exists():
        subprocess.run(["rm", "-rf", str(copy)], check=True)
    copy.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(copy)], input=archive.stdout, check=True)
    tree = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", "HEAD"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    own = [f for f in tree if any(fnmatch.fnmatch(f, g) for g in OWN_TESTS)]
    if rev != "HEAD" and own:
        archive = subprocess.run(
            ["git", "archive", "HEAD", *own], cwd=ROOT, capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", str(copy)], input=archive.stdout, check=True)
    modules = resolve(copy, patterns)
    if not modules:
        sys.exit(f"{area}: no module at HEAD matches {patterns}")
    env = f"PYTHONHASHSEED=0 PYTHONPATH={base} DLPC_CACHE_DIR={workdir / 'cache'}"
    test = " && ".join(f"{env} {c}" for c in commands(AREAS[area], copy))
    script = base / "run-tests.sh"  # cosmic-ray runs its test command without a shell
    script.write_text(f"#!/bin/sh\ncd {copy} && {test}\n")
    config = base / "cosmic-ray.toml"
    config.write_text(
        "[cosmic-ray]\n"
        f"module-path = {json.dumps([f'dlpc/{m}' for m in modules])}\n"
        f"timeout = {timeout}\n"
        "excluded-modules = []\n"
        f"test-command = {json.dumps(f'sh {script}')}\n\n"
        '[cosmic-ray.distributor]\nname = "local"\n'
    )
    session = base / "session.sqlite"
    session.unlink(missing_ok=True)
    subprocess.run(["cosmic-ray", "init", str(config), str(session)], cwd=base, check=True)
    db = sqlite3.connect(session)
    skipped = drop_annotation_mutants(db, copy)
    print(f"{area}: {skipped} mutants in unevaluated annotations skipped", file=sys.stderr)
    if sample is not None:
        jobs = [  # in source order (job ids are random): the same sample for the same seed
            r[0]
            for r in db.execute(
                "select job_id from mutation_specs order by module_path, start_pos_row, "
                "start_pos_col, operator_name, occurrence"
            )
        ]
        keep = set(random.Random(seed).sample(jobs, min(sample, len(jobs))))
        drop = [(j,) for j in jobs if j not in keep]
        db.executemany("delete from mutation_specs where job_id = ?", drop)
        db.executemany("delete from work_items where job_id = ?", drop)
        db.commit()
    db.close()
    start = time.perf_counter()
    baseline = subprocess.run(f"cd {copy} && {test}", shell=True, capture_output=True, text=True)
    took = time.perf_counter() - start
    if baseline.returncode != 0:
        sys.exit(f"{area}: the tests fail without any mutation:\n{baseline.stdout[-2000:]}")
    problem = baseline_problem(area, took, timeout)
    if problem:
        sys.exit(problem)
    print(
        f"{area}: the unmutated tests took {took:.0f} s (timeout {timeout:.0f} s)", file=sys.stderr
    )
    return session


def baseline_problem(area: str, took: float, timeout: float) -> str | None:
    """Why a run whose unmutated tests took `took` seconds cannot be scored, or None.
    A mutant that runs past the timeout counts as killed: with less than twice the unmutated
    run, a mutant that is merely slow on a loaded machine would be scored as caught."""
    if took * 2 <= timeout:
        return None
    return (
        f"{area}: the unmutated tests took {took:.0f} s, over half the {timeout:.0f} s "
        "timeout a mutant gets: raise --timeout or run on a quieter machine"
    )


def summary(session: Path) -> dict:
    db = sqlite3.connect(session)
    rows = db.execute(
        "select r.worker_outcome, r.test_outcome, r.diff, s.module_path, s.start_pos_row, "
        "s.operator_name, coalesce(r.output, '') from work_results r "
        "join mutation_specs s on r.job_id = s.job_id"
    ).fetchall()
    total = db.execute("select count(*) from work_items").fetchone()[0]
    db.close()
    rows = [(w.lower(), (t or "").lower(), *rest) for w, t, *rest in rows]
    killed = sum(1 for w, t, *_ in rows if t == "killed" or w == "timeout")
    survived = [r for r in rows if r[1] == "survived" and r[0] != "timeout"]
    other = len(rows) - killed - len(survived)  # incompetent (the mutant does not import)
    # cosmic-ray records a test run it stopped at the timeout as killed, output "timeout"
    timeouts = sum(1 for *_, out in rows if out.strip().lower() == "timeout")
    return {
        "total": total,
        "done": len(rows),
        "killed": killed,
        "timeouts": timeouts,
        "survived": survived,
        "incompetent": other,
    }


def _mutants(base: Path, where: str) -> list[tuple[str, str, int, int]]:
    """(module, operator, occurrence, row) of the mutants of the session under `base`
    whose result matches `where` (SQL over work_results r)."""
    db = sqlite3.connect(base / "session.sqlite")
    rows = db.execute(
        "select s.module_path, s.operator_name, s.occurrence, s.start_pos_row from work_results r "
        f"join mutation_specs s on r.job_id = s.job_id where {where}"
    ).fetchall()
    db.close()
    return rows


@contextlib.contextmanager
def _applied(base: Path, module: str, operator: str, occurrence: int):
    """The mutant applied (`cosmic-ray apply`) to the copy under `base`; its module is put
    back on leaving, also when stopped with SIGTERM (made an exit by the callers)."""
    path = base / module
    saved = path.read_text()
    try:
        subprocess.run(
            ["cosmic-ray", "apply", module, operator, str(occurrence)],
            cwd=base,
            check=True,
            capture_output=True,
        )
        yield
    finally:
        path.write_text(saved)


def recheck(area: str, workdir: Path, command: str) -> None:
    """Each survivor of the area's last run applied again (`cosmic-ray apply`) to its copy
    and `command` run there: which survivors other tests (outside the area's subset) kill."""
    base = workdir / area
    copy = base / "dlpc"
    rows = _mutants(
        base, "lower(r.test_outcome) = 'survived' and lower(r.worker_outcome) != 'timeout'"
    )
    env = f"PYTHONHASHSEED=0 PYTHONPATH={base} DLPC_CACHE_DIR={workdir / 'cache'}"
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(f"{area}: stopped"))
    for module, operator, occurrence, row in rows:
        with _applied(base, module, operator, occurrence):
            # exported: CMD may be several commands (`cp .. && pytest ..`), each needs them
            done = subprocess.run(
                f"cd {copy} && export {env} && {command}", shell=True, capture_output=True
            )
            verdict = "killed" if done.returncode else "survived"
            print(f"{verdict:8} {module}:{row} ({operator})", flush=True)


def retime(area: str, workdir: Path, seconds: float) -> None:
    """Each mutant of the area's last run that was stopped at its timeout (scored killed)
    applied again and the area's own tests run with `seconds` to finish: a mutant they then
    pass on survived, one they fail on is killed, one still running is a hang (killed)."""
    base = workdir / area
    rows = _mutants(base, "lower(trim(coalesce(r.output, ''))) = 'timeout'")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(f"{area}: stopped"))
    for module, operator, occurrence, row in rows:
        with _applied(base, module, operator, occurrence):
            start = time.perf_counter()
            proc = subprocess.Popen(
                ["sh", str(base / "run-tests.sh")],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            try:
                verdict = "killed" if proc.wait(timeout=seconds) else "survived"
            except subprocess.TimeoutExpired:
                verdict = "hangs"
            finally:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
            took = time.perf_counter() - start
            print(f"{verdict:8} {module}:{row} ({operator}) {took:.0f} s", flush=True)


def report(workdir: Path, show_survivors: bool = True) -> None:
    lines = [
        "| area | mutants run | killed (of which timeouts) | survived | incompetent | score |",
        "|---|---|---|---|---|---|",
    ]
    for area in AREAS:
        session = workdir / area / "session.sqlite"
        if not session.exists():
            continue
        s = summary(session)
        scored = s["killed"] + len(s["survived"])
        score = f"{100 * s['killed'] / scored:.0f} %" if scored else "-"
        lines.append(
            f"| {area} | {s['done']} of {s['total']} | {s['killed']} ({s['timeouts']}) "
            f"| {len(s['survived'])} "
            f"| {s['incompetent']} | {score} |"
        )
        if show_survivors:
            for _w, _t, diff, path, row, op, _out in s["survived"]:
                print(f"--- survived in {area}: {path}:{row} ({op})")
                print(
                    "\n".join(
                        ln
                        for ln in diff.splitlines()
                        if ln[:1] in "+-" and ln[:3] not in ("+++", "---")
                    )
                )
    print("\n".join(lines))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--area", choices=[*AREAS, "all"], help="the area to mutate")
    p.add_argument("--sample", type=int, default=None, help="mutants per area (default: all)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sample")
    p.add_argument("--timeout", type=float, default=None, help="seconds per mutant (the area's)")
    p.add_argument("--workdir", default="/tmp/dlpc-mutation", help="copies and sessions")
    p.add_argument("--recheck", metavar="CMD", help="run CMD (in the area's copy) on each survivor")
    p.add_argument(
        "--retime",
        type=float,
        metavar="SECONDS",
        help="run the area's tests again, with SECONDS to finish, on each mutant that timed out",
    )
    p.add_argument("--rev", default="HEAD", help="the commit whose tree is mutated")
    p.add_argument("--report", action="store_true", help="print the table of every area run")
    args = p.parse_args(argv)
    workdir = Path(args.workdir)
    if args.recheck:
        for area in AREAS if args.area in (None, "all") else [args.area]:
            if (workdir / area / "session.sqlite").exists():
                recheck(area, workdir, args.recheck)
        return 0
    if args.retime:
        for area in AREAS if args.area in (None, "all") else [args.area]:
            if (workdir / area / "session.sqlite").exists():
                retime(area, workdir, args.retime)
        return 0
    if args.area:
        for area in AREAS if args.area == "all" else [args.area]:
            start = time.perf_counter()
            timeout = args.timeout or AREAS[area].timeout
            session = prepare(area, workdir, args.sample, args.seed, timeout, args.rev)
            subprocess.run(
                ["cosmic-ray", "exec", str(workdir / area / "cosmic-ray.toml"), str(session)],
                cwd=workdir / area,
                check=True,
            )
            print(f"{area}: {time.perf_counter() - start:.0f} s", file=sys.stderr)
    report(workdir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
