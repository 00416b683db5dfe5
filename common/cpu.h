/* cpu.h -- the CPU a process runs on, as the run files name it (environment.cpu), header-only.
 *
 * cpu_describe(out, n): "MODEL; EXT..." from /proc/cpuinfo: the first "model name" and, of the
 * first "flags" line, the vector extensions the nn kernels' floating-point sums depend on (they are
 * built with -march=native: the same seed ends in other weights on a CPU with other vector units),
 * in this order: sse4_2 avx avx2 fma avx512f avx512_bf16 amx_tile. "unknown model" where there is
 * no model name. Returns 1 and fills out (truncated to n - 1 characters), or 0 where /proc/cpuinfo
 * is not readable or has neither line. One spelling for eager-train (trainer/metrics.c) and the
 * PyTorch package (python/csrc/eager_py.c); jobs/ddp_race.sh compares the model part.
 */
#ifndef COMMON_CPU_H
#define COMMON_CPU_H

#include <stdio.h>
#include <string.h>

static inline int cpu_describe(char *out, size_t n) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return 0;
    char line[8192], model[256] = "", flags[128] = "";
    int have_flags = 0;
    while (fgets(line, sizeof line, f) && (!model[0] || !have_flags)) {
        char *v = strchr(line, ':');
        if (!v) continue;
        v += 1 + (v[1] == ' ');
        v[strcspn(v, "\n")] = 0;
        if (!model[0] && !strncmp(line, "model name", 10)) snprintf(model, sizeof model, "%s", v);
        if (!have_flags && !strncmp(line, "flags", 5)) {
            const char *want[] = {"sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_bf16", "amx_tile"};
            have_flags = 1;
            for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
                size_t k = strlen(want[i]);
                for (const char *q = v; (q = strstr(q, want[i])); q += k)
                    if ((q == v || q[-1] == ' ') && (q[k] == ' ' || q[k] == 0)) {
                        size_t m = strlen(flags);
                        snprintf(flags + m, sizeof flags - m, "%s%s", m ? " " : "", want[i]);
                        break;
                    }
            }
        }
    }
    fclose(f);
    if (!model[0] && !have_flags) return 0;
    snprintf(out, n, "%s; %s", model[0] ? model : "unknown model", flags);
    return 1;
}

#endif
