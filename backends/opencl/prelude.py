"""The text every OpenCL program opens with: the prelude's macros (`PRELUDE`), dlpc's
own erf (`ERF`) and the C math spellings mapped onto OpenCL's (`MATH_MACROS`).
"""

from __future__ import annotations

from dlpc.backends import c as cbe

PRELUDE = (
    """\
typedef long int64_t;
typedef ulong uint64_t;
typedef int int32_t;
typedef uint uint32_t;
typedef short int16_t;
typedef ushort uint16_t;
typedef char int8_t;
typedef uchar uint8_t;
#define INT64_C(x) x##L
typedef float dlpc_float16u __attribute__((ext_vector_type(16), aligned(4)));
"""
    + cbe.SCALAR_HELPERS
)
# the C backend spells float math with the libm `f` suffix; OpenCL C overloads one name
_RENAMED = {"nearbyint": "rint"}
#: f32 math written with dlpc's own functions (scalars through the C spelling `erff`,
#: vectors in `vector_math`); f64 keeps OpenCL's builtins
OWN_F32 = {"erf": "dlpc_erf"}
# erf as a rational function (the odd/even minimax pair that Eigen and XLA use for float
# erf) on scalars and vectors alike: fmas and a division, far cheaper than PoCL's erf
# (docs/design/opencl-experiments.md). Within 6 ulp of erf (float64) on [-6, 6], exactly +-1 beyond |x| = 3.85
# (float erf rounds to 1 there: gelu far left stays -0.0), NaN kept (every comparison
# is false), the product with x last (a subnormal x loses no more than its own bits).
# OpenCL allows erf 16 ulp. Operators and `?:` only: PoCL calls its builtins on
# vectors (clamp, select, fma, copysign) as functions, which kept it at 2.2 ns an element.
# (`static`: as a plain C99 `inline` overload set, one program, test_ieee's, built with
# no kernels at all and an empty log.) f32 only (`OWN_F32`): f64 keeps the builtin.
ERF = """\
#define DLPC_ERF(T) \\
__attribute__((overloadable)) static inline T dlpc_erf(T x) \\
{ \\
  const T c = x > (T)(4.0f) ? (T)(4.0f) : x < (T)(-4.0f) ? (T)(-4.0f) : x, z = c * c; \\
  T p = z * (T)(-2.72614225801306e-10f) + (T)(2.77068142495902e-08f); \\
  p = p * z + (T)(-2.10102402082508e-06f); \\
  p = p * z + (T)(-5.69250639462346e-05f); \\
  p = p * z + (T)(-7.34990630326855e-04f); \\
  p = p * z + (T)(-2.95459980854025e-03f); \\
  p = p * z + (T)(-1.60960333262415e-02f); \\
  T q = z * (T)(-1.45660718464996e-05f) + (T)(-2.13374055278905e-04f); \\
  q = q * z + (T)(-1.68282697438203e-03f); \\
  q = q * z + (T)(-7.37332916720468e-03f); \\
  q = q * z + (T)(-1.42647390514189e-02f); \\
  return x > (T)(3.85f) ? (T)(1.0f) : x < (T)(-3.85f) ? (T)(-1.0f) : c * (p / q); \\
}
"""
FLOATS = ("float", "float2", "float4", "float8", "float16")
MATH_MACROS = (
    ERF
    + "\n".join(
        f"#define {name}f {OWN_F32.get(name, _RENAMED.get(name, name))}"
        for name in sorted({*cbe.MATH_UNARY.values(), *cbe.MATH_BINARY.values(), "fma"})
        if name != "tanh"
    )
    + "\n#define nearbyint rint\n"
    # PoCL's tanh stops one ulp short of +-1 for large |x| (OpenCL allows 4 ulp), so
    # gelu's 1 + tanh(...) was 6e-8 instead of 0 far left (-88 -> -2.6e-6, -inf -> -inf);
    # float tanh is exactly +-1 beyond |x| = 10, as glibc and torch give (docs/numerics.md)
    + "inline float dlpc_tanhf(float x) { return fabs(x) > 10.0f ? copysign(1.0f, x) : tanh(x); }\n"
    + "#define tanhf dlpc_tanhf\n"
    + "".join(f"DLPC_ERF({t})\n" for t in FLOATS)
)
