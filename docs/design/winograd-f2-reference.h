/* The recommended F(2x2,3x3) kernel written out the way dlpc could emit it (no macros, no
   intrinsics; int64_t indices, restrict, aligned stack buffers, `omp simd` / `GCC unroll`).
   3x3 conv, stride 1, pad 1, Ci = Co = C, NCHW, fused bias + residual + relu.
   Included by wino.c (needs C_, H_, N_ defined; W = H). Compile the translation unit with
   -fno-tree-loop-distribute-patterns or keep the optimize attribute below.

   U: filter transform done at compile time, U[16][Co][Ci] (xi = 4*i + j of G g G^T).
   Per job (image n, block of 16 tiles = R tile rows, output-channel part):
     slab[C][2R+2][W+2]  padded input rows of the block (zero halo)
     Vb[16][C][16]       input transform B^T d B, vector over the tiles of a tile row
     per 8 output channels: 16 GEMMs 8x16 (k = C) -> Mb[16][8][16], output transform A^T M A,
     + bias + residual, relu -> out. */
#define F2R_TW (H_ / 2)          /* tiles per tile row */
#define F2R_FB 16                /* tiles per block */
#define F2R_R (F2R_FB / F2R_TW)  /* tile rows per block (H_ <= 32) */
#define F2R_NB (F2R_TW / F2R_R)  /* blocks per image */
#define F2R_SR (2 * F2R_R + 2)   /* slab rows */
#define F2R_WP (H_ + 2)          /* slab row length */
#define F2R_CB 8                 /* output channels per register block */
#ifndef F2R_RELU /* dlpc's NaN-propagating max(y, 0) (DLPC_MAXIMUMF(y, 0.0f)); measured: same speed */
#define F2R_RELU(y) ((0.0f) != (0.0f) ? (0.0f) : (0.0f) > (y) ? (0.0f) : (y))
#endif

__attribute__((optimize("no-tree-loop-distribute-patterns"))) static void
conv3x3_wino_f2_ref(const float *restrict x, const float *restrict U, const float *restrict bias,
                    const float *restrict res, float *restrict out, int cparts)
{
  const int64_t njob = (int64_t)N_ * F2R_NB * cparts;
  const int64_t cpart_len = C_ / cparts; /* multiple of F2R_CB */
#pragma omp parallel for schedule(static) if (cparts > 1 || njob > 1)
  for (int64_t job = 0; job < njob; job++) {
    const int64_t cpart = job % cparts, blk = job / cparts;
    const int64_t n = blk / F2R_NB, ty0 = (blk % F2R_NB) * F2R_R;
    float slab_mem[C_ * F2R_SR * F2R_WP] __attribute__((aligned(64)));
    float Vb_mem[16 * C_ * F2R_FB] __attribute__((aligned(64)));
    float Mb_mem[16 * F2R_CB * F2R_FB] __attribute__((aligned(64)));
    float *restrict slab = slab_mem, *restrict Vb = Vb_mem, *restrict Mb = Mb_mem;
    const float *restrict xn = x + n * C_ * H_ * H_;

    /* 1. padded slab */
    for (int64_t c = 0; c < C_; c++)
      for (int64_t r = 0; r < F2R_SR; r++) {
        const int64_t y = 2 * ty0 - 1 + r;
        float *restrict q = slab + (c * F2R_SR + r) * F2R_WP;
        if (y < 0 || y >= H_) {
#pragma omp simd
          for (int64_t j = 0; j < F2R_WP; j++) q[j] = 0.0f;
        } else {
          const float *restrict p = xn + c * H_ * H_ + y * H_;
          q[0] = 0.0f;
          q[F2R_WP - 1] = 0.0f;
#pragma omp simd
          for (int64_t j = 0; j < H_; j++) q[1 + j] = p[j];
        }
      }

    /* 2. input transform V = B^T d B, B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1] */
    for (int64_t c = 0; c < C_; c++)
      for (int64_t r = 0; r < F2R_R; r++) {
        const float *restrict s = slab + (c * F2R_SR + 2 * r) * F2R_WP;
        float *restrict v = Vb + c * F2R_FB + r * F2R_TW;
#pragma omp simd
        for (int64_t t = 0; t < F2R_TW; t++) {
          const float d00 = s[0 * F2R_WP + 2 * t + 0], d01 = s[0 * F2R_WP + 2 * t + 1];
          const float d02 = s[0 * F2R_WP + 2 * t + 2], d03 = s[0 * F2R_WP + 2 * t + 3];
          const float d10 = s[1 * F2R_WP + 2 * t + 0], d11 = s[1 * F2R_WP + 2 * t + 1];
          const float d12 = s[1 * F2R_WP + 2 * t + 2], d13 = s[1 * F2R_WP + 2 * t + 3];
          const float d20 = s[2 * F2R_WP + 2 * t + 0], d21 = s[2 * F2R_WP + 2 * t + 1];
          const float d22 = s[2 * F2R_WP + 2 * t + 2], d23 = s[2 * F2R_WP + 2 * t + 3];
          const float d30 = s[3 * F2R_WP + 2 * t + 0], d31 = s[3 * F2R_WP + 2 * t + 1];
          const float d32 = s[3 * F2R_WP + 2 * t + 2], d33 = s[3 * F2R_WP + 2 * t + 3];
          /* rows: t_i = sum_k B^T[i][k] d_k */
          const float t00 = d00 - d20, t01 = d01 - d21, t02 = d02 - d22, t03 = d03 - d23;
          const float t10 = d10 + d20, t11 = d11 + d21, t12 = d12 + d22, t13 = d13 + d23;
          const float t20 = d20 - d10, t21 = d21 - d11, t22 = d22 - d12, t23 = d23 - d13;
          const float t30 = d10 - d30, t31 = d11 - d31, t32 = d12 - d32, t33 = d13 - d33;
          /* columns, stored at Vb[xi][c][tile] */
          v[0 * C_ * F2R_FB + t] = t00 - t02;
          v[1 * C_ * F2R_FB + t] = t01 + t02;
          v[2 * C_ * F2R_FB + t] = t02 - t01;
          v[3 * C_ * F2R_FB + t] = t01 - t03;
          v[4 * C_ * F2R_FB + t] = t10 - t12;
          v[5 * C_ * F2R_FB + t] = t11 + t12;
          v[6 * C_ * F2R_FB + t] = t12 - t11;
          v[7 * C_ * F2R_FB + t] = t11 - t13;
          v[8 * C_ * F2R_FB + t] = t20 - t22;
          v[9 * C_ * F2R_FB + t] = t21 + t22;
          v[10 * C_ * F2R_FB + t] = t22 - t21;
          v[11 * C_ * F2R_FB + t] = t21 - t23;
          v[12 * C_ * F2R_FB + t] = t30 - t32;
          v[13 * C_ * F2R_FB + t] = t31 + t32;
          v[14 * C_ * F2R_FB + t] = t32 - t31;
          v[15 * C_ * F2R_FB + t] = t31 - t33;
        }
      }

    for (int64_t co0 = cpart * cpart_len; co0 < (cpart + 1) * cpart_len; co0 += F2R_CB) {
      /* 3. 16 GEMMs: Mb[xi][i][t] = sum_k U[xi][co0+i][k] * Vb[xi][k][t] */
      for (int64_t xi = 0; xi < 16; xi++) {
        float acc_mem[F2R_CB * F2R_FB] __attribute__((aligned(64)));
        float *restrict acc = acc_mem;
        const float *restrict u = U + (xi * C_ + co0) * C_;
        const float *restrict vb = Vb + xi * C_ * F2R_FB;
#pragma GCC unroll 16
        for (int64_t i = 0; i < F2R_CB; i++)
#pragma omp simd
          for (int64_t t = 0; t < F2R_FB; t++) acc[i * F2R_FB + t] = u[i * C_] * vb[t]; /* k = 0 */
        for (int64_t k = 1; k < C_; k++) {
#pragma GCC unroll 16
          for (int64_t i = 0; i < F2R_CB; i++)
#pragma omp simd
            for (int64_t t = 0; t < F2R_FB; t++) acc[i * F2R_FB + t] += u[i * C_ + k] * vb[k * F2R_FB + t];
        }
        float *restrict m = Mb + xi * F2R_CB * F2R_FB;
        for (int64_t i = 0; i < F2R_CB; i++)
#pragma omp simd
          for (int64_t t = 0; t < F2R_FB; t++) m[i * F2R_FB + t] = acc[i * F2R_FB + t];
      }
      /* 4. output transform y = A^T M A, A^T = [1 1 1 0; 0 1 -1 -1], + bias + residual, relu */
      for (int64_t i = 0; i < F2R_CB; i++) {
        const int64_t co = co0 + i;
        const float b = bias[co];
        for (int64_t r = 0; r < F2R_R; r++) {
          const float *restrict m = Mb + i * F2R_FB + r * F2R_TW;
          const int64_t o = (n * C_ + co) * H_ * H_ + 2 * (ty0 + r) * H_;
          const float *restrict rp = res + o;
          float *restrict op = out + o;
#pragma omp simd
          for (int64_t t = 0; t < F2R_TW; t++) {
            const float m00 = m[0 * F2R_CB * F2R_FB + t], m01 = m[1 * F2R_CB * F2R_FB + t];
            const float m02 = m[2 * F2R_CB * F2R_FB + t], m03 = m[3 * F2R_CB * F2R_FB + t];
            const float m10 = m[4 * F2R_CB * F2R_FB + t], m11 = m[5 * F2R_CB * F2R_FB + t];
            const float m12 = m[6 * F2R_CB * F2R_FB + t], m13 = m[7 * F2R_CB * F2R_FB + t];
            const float m20 = m[8 * F2R_CB * F2R_FB + t], m21 = m[9 * F2R_CB * F2R_FB + t];
            const float m22 = m[10 * F2R_CB * F2R_FB + t], m23 = m[11 * F2R_CB * F2R_FB + t];
            const float m30 = m[12 * F2R_CB * F2R_FB + t], m31 = m[13 * F2R_CB * F2R_FB + t];
            const float m32 = m[14 * F2R_CB * F2R_FB + t], m33 = m[15 * F2R_CB * F2R_FB + t];
            const float a0 = m00 + m10 + m20, a1 = m01 + m11 + m21, a2 = m02 + m12 + m22, a3 = m03 + m13 + m23;
            const float c0 = m10 - m20 - m30, c1 = m11 - m21 - m31, c2 = m12 - m22 - m32, c3 = m13 - m23 - m33;
            const float y00 = a0 + a1 + a2 + b + rp[2 * t], y01 = a1 - a2 - a3 + b + rp[2 * t + 1];
            const float y10 = c0 + c1 + c2 + b + rp[H_ + 2 * t], y11 = c1 - c2 - c3 + b + rp[H_ + 2 * t + 1];
            op[2 * t] = F2R_RELU(y00);
            op[2 * t + 1] = F2R_RELU(y01);
            op[H_ + 2 * t] = F2R_RELU(y10);
            op[H_ + 2 * t + 1] = F2R_RELU(y11);
          }
        }
      }
    }
  }
}
