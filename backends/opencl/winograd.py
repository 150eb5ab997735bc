"""The fused Winograd F(2x2, 3x3) kernel as OpenCL C: what `loop-opencl-winograd`
(passes/lower/opencl_winograd.py) marks `opencl_winograd = "fused ..."`, written by hand
(`write_fused`, called first by `OpenCLEmitter.kernel`): one work-item per (image, row of
output tiles), work-groups of one work-item, a body function for chains and teams like
every kernel's:

- V = B^T d B of the row for every input channel: the four input rows of the tile row
  loaded as unaligned `float16`s (`dlpc_float16u`), split into even and odd columns
  (`.even`, `.odd`; the neighbours of a block of 8 tiles are two scalars), so padding
  costs one test per row and none per lane; 32 adds per tile on `float8`s of 8 tiles;
- M[t] = U[t] V[t] for the 16 points: 4 output channels x 16 tiles (two `float8`s a
  channel) when the row has a multiple of 16 tiles, else 8 x 8: 8 `float8` accumulators,
  U's scalars broadcast;
- y = A^T M A, the bias, the residual (its two rows loaded as `float16`s and split as
  the input's) and relu (`DLPC_MAXIMUMF` on vectors), two output rows stored as
  `float16`s (the tile columns interleaved).

V and M never leave the work-item (private arrays), as in the C's fused kernel
(passes/schedule/winograd.py `fused_script`). The blockings' measurements:
docs/design/opencl-experiments.md (Winograd).
"""

from __future__ import annotations

from xdsl.dialects.builtin import StringAttr

from dlpc.backends import c as cbe
from dlpc.backends.names import Scope, c_comment
from dlpc.backends.opencl.launch import Launch
from dlpc.dialects.loop import ForOp, KernelOp
from dlpc.dialects.typed import shape_of
from dlpc.passes.lower.opencl_winograd import (
    FUSED,
    FusedSpec,
    is_fused,
    origin_of,
    outside_values,
)


def fused_spec_of(k: KernelOp) -> FusedSpec:
    """The spec of a kernel `fuse_chain` made (`is_fused`), from its attribute: the
    positions of its buffers among the values it uses from outside."""
    attr = k.attributes[FUSED]
    assert isinstance(attr, StringAttr)
    free = outside_values(k)
    at = {key: int(v) for key, v in (part.split("=") for part in attr.data.split()[1:])}
    role = {key: free[i] if i >= 0 else None for key, i in at.items()}
    x, u, y = role["x"], role["u"], role["y"]
    assert x is not None and u is not None and y is not None
    n, co, h, w = shape_of(y)
    relu = origin_of(k).endswith("graph.relu)")
    return FusedSpec(x, u, role["bias"], role["residual"], y, n, shape_of(x)[1], co, h, w, relu)


def fused_source(spec: FusedSpec, p: dict[str, str], ids: tuple[str, str]) -> list[str]:
    """The body lines of the fused kernel: `p` names the parameters (x, u, bias,
    residual, y), `ids` the work-item's image and row of tiles."""
    c, co, h, w = spec.c, spec.co, spec.h, spec.w
    tw = w // 2
    tb = 16 if tw % 16 == 0 else 8  # tiles per gemm block: 2 or 1 float8 per row
    cb = 4 if tb == 16 else 8  # output channels per gemm block (8 float8 accumulators)
    n_, t_ = ids
    x, u, y = p["x"], p["u"], p["y"]
    L = [
        f"  __global const float *xn = {x} + {n_} * {c * h * w}L;",
        f"  float V[16][{c}][{tw}];",
        f"  float M[16][{co}][{tw}];",
        "  /* V: the input transform of this row of tiles, B^T d B, 8 tiles a vector */",
        f"  for (int ci = 0; ci < {c}; ci++) {{",
        f"    __global const float *xc = xn + ci * {h * w};",
        f"    for (int b0 = 0; b0 < {tw}; b0 += 8) {{",
        "      float8 d[4][4];",
        "      #pragma unroll",
        "      for (int i = 0; i < 4; i++) {",
        f"        const long r = 2 * {t_} + i - 1;",
        "        float8 ev = (float8)(0.0f), od = (float8)(0.0f);",
        "        float prev = 0.0f, next = 0.0f;",
        f"        if (r >= 0 && r < {h}) {{",
        f"          __global const float *row = xc + r * {w} + 2 * b0;",
        "          const float16 a = *(__global const dlpc_float16u *)row;",
        "          ev = a.even;",
        "          od = a.odd;",
        "          if (b0 > 0) prev = row[-1];",
        f"          if (2 * b0 + 16 < {w}) next = row[16];",
        "        }",
        "        d[i][0] = (float8)(prev, od.s0, od.s1, od.s2, od.s3, od.s4, od.s5, od.s6);",
        "        d[i][1] = ev;",
        "        d[i][2] = od;",
        "        d[i][3] = (float8)(ev.s1, ev.s2, ev.s3, ev.s4, ev.s5, ev.s6, ev.s7, next);",
        "      }",
        "      #pragma unroll",
        "      for (int j = 0; j < 4; j++) {",
        "        const float8 e0 = d[0][j] - d[2][j], e1 = d[1][j] + d[2][j];",
        "        const float8 e2 = d[2][j] - d[1][j], e3 = d[1][j] - d[3][j];",
        "        d[0][j] = e0; d[1][j] = e1; d[2][j] = e2; d[3][j] = e3;",
        "      }",
        "      #pragma unroll",
        "      for (int a = 0; a < 4; a++) {",
        "        *(float8 *)&V[4 * a + 0][ci][b0] = d[a][0] - d[a][2];",
        "        *(float8 *)&V[4 * a + 1][ci][b0] = d[a][1] + d[a][2];",
        "        *(float8 *)&V[4 * a + 2][ci][b0] = d[a][2] - d[a][1];",
        "        *(float8 *)&V[4 * a + 3][ci][b0] = d[a][1] - d[a][3];",
        "      }",
        "    }",
        "  }",
        f"  /* M[t] = U[t] V[t]: {cb} output channels x {tb} tiles a block */",
        "  for (int t = 0; t < 16; t++) {",
        f"    for (int o0 = 0; o0 < {co}; o0 += {cb}) {{",
        f"      for (int b0 = 0; b0 < {tw}; b0 += {tb}) {{",
        f"        __global const float *ut = {u} + (t * {co} + o0) * {c};",
    ]
    halves = tb // 8
    accs = [(k, hh) for k in range(cb) for hh in range(halves)]
    L.append("        float8 " + ", ".join(f"a{k}_{hh} = (float8)(0.0f)" for k, hh in accs) + ";")
    L += [
        f"        for (int k = 0; k < {c}; k++) {{",
        *(
            f"          const float8 v{hh} = *(float8 *)&V[t][k][b0 + {8 * hh}];"
            for hh in range(halves)
        ),
    ]
    for k in range(cb):
        L.append(f"          const float u{k} = ut[{k * c} + k];")
    for k, hh in accs:
        L.append(f"          a{k}_{hh} += u{k} * v{hh};")
    L.append("        }")
    for k, hh in accs:
        L.append(f"        *(float8 *)&M[t][o0 + {k}][b0 + {8 * hh}] = a{k}_{hh};")
    L += [
        "      }",
        "    }",
        "  }",
        "  /* y: A^T M A, two output rows, and the epilogue */",
        f"  for (int o = 0; o < {co}; o++) {{",
        f"    for (int b0 = 0; b0 < {tw}; b0 += 8) {{",
        "      float8 m[16];",
        "      #pragma unroll",
        "      for (int t = 0; t < 16; t++) m[t] = *(float8 *)&M[t][o][b0];",
        "      float8 r0[4], r1[4];",
        "      #pragma unroll",
        "      for (int j = 0; j < 4; j++) {",
        "        r0[j] = m[j] + (m[4 + j] + m[8 + j]);",
        "        r1[j] = m[4 + j] - (m[8 + j] + m[12 + j]);",
        "      }",
        "      float8 y00 = r0[0] + (r0[1] + r0[2]), y01 = r0[1] - (r0[2] + r0[3]);",
        "      float8 y10 = r1[0] + (r1[1] + r1[2]), y11 = r1[1] - (r1[2] + r1[3]);",
        f"      const long at0 = (({n_} * {co} + o) * {h} + 2 * {t_}) * {w} + 2 * b0;",
        f"      const long at1 = at0 + {w};",
    ]
    if spec.bias is not None:
        L += [
            f"      const float bo = {p['bias']}[o];",
            "      y00 = y00 + bo; y01 = y01 + bo; y10 = y10 + bo; y11 = y11 + bo;",
        ]
    if spec.residual is not None:
        r = p["residual"]
        L += [
            f"      const float16 q0 = *(__global const dlpc_float16u *)({r} + at0);",
            f"      const float16 q1 = *(__global const dlpc_float16u *)({r} + at1);",
            "      y00 = y00 + q0.even; y01 = y01 + q0.odd; y10 = y10 + q1.even; y11 = y11 + q1.odd;",
        ]
    if spec.relu:
        L += [
            "      const float8 z = (float8)(0.0f);",
            "      y00 = DLPC_MAXIMUMF(y00, z); y01 = DLPC_MAXIMUMF(y01, z);",
            "      y10 = DLPC_MAXIMUMF(y10, z); y11 = DLPC_MAXIMUMF(y11, z);",
        ]
    inter = ", ".join(f"{{a}}.s{k}, {{b}}.s{k}" for k in range(8))
    L += [
        f"      *(__global dlpc_float16u *)({y} + at0) = (float16)({inter.format(a='y00', b='y01')});",
        f"      *(__global dlpc_float16u *)({y} + at1) = (float16)({inter.format(a='y10', b='y11')});",
        "    }",
        "  }",
    ]
    return L


def write_fused(emitter, k: KernelOp, chained: bool) -> bool:
    """Write fused kernel `k` (`is_fused`) into `emitter` (an `OpenCLEmitter`): its
    launch (NDRange: images x rows of tiles), its `__kernel` and, when `chained`, its body
    function for chains; False when `k` is no such kernel."""
    if not is_fused(k):
        return False
    spec = fused_spec_of(k)
    fname = emitter.top.fresh(k.sym, kind="kernel")
    names = Scope(emitter.top.used)
    roles = [("x", spec.x), ("u", spec.u), ("bias", spec.bias), ("residual", spec.residual)]
    roles = [(r, v) for r, v in roles if v is not None] + [("y", spec.y)]
    p = {r: names.fresh(v.name_hint, r) for r, v in roles}
    params = [f"__global {'' if r == 'y' else 'const '}float *restrict {p[r]}" for r, _ in roles]
    dims = (spec.n, spec.h // 2)
    loops = [op for op in k.block.ops if isinstance(op, ForOp)][:2]
    # one work-item a work-group: PoCL keeps a work-group's private arrays side by side
    # (its work-item loops), and 32 KB each for a group of the NDRange overflowed the
    # stack (resnet at batch 32, each kernel launched alone: a crash)
    launch = Launch(fname, dims, (1, 1))
    launch.mapped = {lp: f"get_global_id({d})" for d, lp in enumerate(loops)}  # (the ids)
    launch.args = [v for _, v in roles]
    emitter.launches[k] = launch
    ids = (names.fresh("n", "id"), names.fresh("t", "id"))
    body = emitter.top.fresh(f"{k.sym}_body", kind="kernel")
    note = c_comment(
        cbe.kernel_note(k)
        + f": fused Winograd F(2x2, 3x3), global ({dims[0]}, {dims[1]}), local (1, 1)"
    )
    signature = f"static inline void {body}({', '.join(params + [f'const long {i}' for i in ids])})"
    emitter.parts.append(
        f"{note}\n{signature}\n{{\n" + "\n".join(fused_source(spec, p, ids)) + "\n}\n"
    )
    call = [p[r] for r, _ in roles] + [f"(long)get_global_id({d})" for d in range(2)]
    emitter.parts.append(
        f"__kernel void {fname}({', '.join(params)})\n{{\n  {body}({', '.join(call)});\n}}\n"
    )
    if chained and (emitter.groups <= 1 or spec.n % emitter.groups == 0):
        types = [q[len("__global ") :].rsplit(" *restrict ", 1)[0] for q in params]
        emitter.bodies[k] = (body, types, [(v, None) for v in launch.args])
        if emitter.groups > 1:
            emitter.batches[k] = spec.n
    return True
