#include <stdlib.h>
#include <time.h>
static volatile unsigned long sink;
__attribute__((noinline)) unsigned long chain_leaf(unsigned long n) {
    unsigned long x = n;
    for (int i = 0; i < 2000; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
    sink = x;
    return x;
}
__attribute__((noinline)) unsigned long chain_d(unsigned long n) { return chain_leaf(n + 1) ^ sink; }
__attribute__((noinline)) unsigned long chain_c(unsigned long n) { return chain_d(n * 3) + sink; }
__attribute__((noinline)) unsigned long chain_b(unsigned long n) { return chain_c(n + 7) ^ (sink >> 3); }
__attribute__((noinline)) unsigned long chain_a(unsigned long n) { return chain_b(n ^ 5) + (sink << 1); }
int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 2.0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    unsigned long acc = 0;
    for (;;) {
        for (int i = 0; i < 1000; i++) acc += chain_a(acc + i);
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 >= secs) break;
    }
    sink = acc; /* kept, so the loop is not optimised away; exit 0: profile passes the status on */
    return 0;
}
