/* gemm.c: sgemm split over OpenMP threads (each thread one single-threaded OpenBLAS call on a
 * block of the output), so GEMMs and the OpenMP loops around them share the same threads
 * instead of OpenBLAS's own pool and OpenMP's spinning against each other on few cores. */
#include "trainer/nn/nn_impl.h"
#ifdef _OPENMP
#include <omp.h>
#endif

void nn_gemm_init(void) {
#ifdef _OPENMP
    openblas_set_num_threads(1);
#endif
}

char *openblas_get_corename(void);

const char *nn_blas_coretype_hint(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    static const char *generic[] = {"Prescott", "Core2",      "Penryn",    "Dunnington", "Nehalem", "Atom",
                                    "Katmai",   "Coppermine", "Northwood", "Banias",     "unknown"};
    const char *core = openblas_get_corename();
    int gen = 0;
    for (size_t i = 0; i < sizeof generic / sizeof generic[0]; i++) gen |= core && !strcmp(core, generic[i]);
    if (!gen) return NULL;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
    if (__builtin_cpu_supports("avx")) return "Sandybridge";
#endif
    return NULL;
}

void nn_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
              int ldb, float beta, float *C, int ldc) {
    CBLAS_TRANSPOSE TA = ta ? CblasTrans : CblasNoTrans, TB = tb ? CblasTrans : CblasNoTrans;
#ifdef _OPENMP
    int nt = omp_get_max_threads();
    double work = 2.0 * M * N * K;
    if (nt > 1 && work > 4e6 && !omp_in_parallel()) {
        int splitN = N >= M; /* split the larger output dimension */
        int D = splitN ? N : M;
        if (D >= 32 * nt || (D >= 16 * nt)) {
#pragma omp parallel num_threads(nt)
            {
                int t = omp_get_thread_num(), n = omp_get_num_threads();
                int per = ((D + n - 1) / n + 15) / 16 * 16;
                int d0 = t * per, d1 = d0 + per > D ? D : d0 + per;
                if (d1 > d0) {
                    if (splitN)
                        cblas_sgemm(CblasRowMajor, TA, TB, M, d1 - d0, K, alpha, A, lda,
                                    tb ? B + (size_t)d0 * ldb : B + d0, ldb, beta, C + d0, ldc);
                    else
                        cblas_sgemm(CblasRowMajor, TA, TB, d1 - d0, N, K, alpha,
                                    ta ? A + d0 : A + (size_t)d0 * lda, lda, B, ldb, beta,
                                    C + (size_t)d0 * ldc, ldc);
                }
            }
            return;
        }
    }
#endif
    cblas_sgemm(CblasRowMajor, TA, TB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
