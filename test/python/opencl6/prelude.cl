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
#define DLPC_MAXIMUMF(a, b) ((b) != (b) ? (b) : (b) > (a) ? (b) : (a))
#define DLPC_MINIMUMF(a, b) ((b) != (b) ? (b) : (b) < (a) ? (b) : (a))
#define DLPC_MAX(a, b) ((a) > (b) ? (a) : (b))
#define DLPC_MIN(a, b) ((a) < (b) ? (a) : (b))
#define DLPC_FLOORDIV(a, b) ((a) / (b) - (((a) % (b) != 0) && (((a) < 0) != ((b) < 0))))
#define DLPC_CEILDIV(a, b) ((a) / (b) + (((a) % (b) != 0) && (((a) < 0) == ((b) < 0))))

/* math.ipowi: a ** b by squaring, wrapping like the result type's multiplication; for
   b < 0 the integer part of 1 / a ** |b| (1 and -1 are their own reciprocals, others 0) */
static inline int64_t dlpc_ipowi(int64_t a, int64_t b)
{
  if (b < 0)
    return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
  uint64_t r = 1, x = (uint64_t)a;
  for (; b; b >>= 1, x *= x)
    if (b & 1)
      r *= x;
  return (int64_t)r;
}

#define DLPC_ERF(T) \
__attribute__((overloadable)) static inline T dlpc_erf(T x) \
{ \
  const T c = x > (T)(4.0f) ? (T)(4.0f) : x < (T)(-4.0f) ? (T)(-4.0f) : x, z = c * c; \
  T p = z * (T)(-2.72614225801306e-10f) + (T)(2.77068142495902e-08f); \
  p = p * z + (T)(-2.10102402082508e-06f); \
  p = p * z + (T)(-5.69250639462346e-05f); \
  p = p * z + (T)(-7.34990630326855e-04f); \
  p = p * z + (T)(-2.95459980854025e-03f); \
  p = p * z + (T)(-1.60960333262415e-02f); \
  T q = z * (T)(-1.45660718464996e-05f) + (T)(-2.13374055278905e-04f); \
  q = q * z + (T)(-1.68282697438203e-03f); \
  q = q * z + (T)(-7.37332916720468e-03f); \
  q = q * z + (T)(-1.42647390514189e-02f); \
  return x > (T)(3.85f) ? (T)(1.0f) : x < (T)(-3.85f) ? (T)(-1.0f) : c * (p / q); \
}
#define acosf acos
#define acoshf acosh
#define asinf asin
#define asinhf asinh
#define atanf atan
#define atan2f atan2
#define atanhf atanh
#define cbrtf cbrt
#define ceilf ceil
#define copysignf copysign
#define cosf cos
#define coshf cosh
#define erff dlpc_erf
#define expf exp
#define exp2f exp2
#define expm1f expm1
#define fabsf fabs
#define floorf floor
#define fmaf fma
#define fmaxf fmax
#define fminf fmin
#define fmodf fmod
#define logf log
#define log10f log10
#define log1pf log1p
#define log2f log2
#define nearbyintf rint
#define powf pow
#define roundf round
#define sinf sin
#define sinhf sinh
#define sqrtf sqrt
#define tanf tan
#define truncf trunc
#define nearbyint rint
inline float dlpc_tanhf(float x) { return fabs(x) > 10.0f ? copysign(1.0f, x) : tanh(x); }
#define tanhf dlpc_tanhf
DLPC_ERF(float)
DLPC_ERF(float2)
DLPC_ERF(float4)
DLPC_ERF(float8)
DLPC_ERF(float16)

