/* A tiny "JIT": copies two functions of machine code into anonymous
 * executable memory, names them in /tmp/perf-PID.map the way Python's
 * -X perf and Node's --perf-basic-prof do, and runs them for the given
 * seconds. jit_outer calls jit_inner, which spins; both keep frame pointers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static const unsigned char inner[] = {
    0x55,                         /* push %rbp */
    0x48, 0x89, 0xe5,             /* mov %rsp,%rbp */
    0xb9, 0xa0, 0x86, 0x01, 0x00, /* mov $100000,%ecx */
    0xff, 0xc9,                   /* 1: dec %ecx */
    0x75, 0xfc,                   /* jnz 1b */
    0x5d,                         /* pop %rbp */
    0xc3,                         /* ret */
};
#define OUTER 64
static const unsigned char outer[] = {
    0x55, 0x48, 0x89, 0xe5,       /* push %rbp; mov %rsp,%rbp */
    0xe8, 0xb7, 0xff, 0xff, 0xff, /* call inner (64 + 9 - 73 = 0) */
    0x5d, 0xc3,                   /* pop %rbp; ret */
};

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 2.0;
    unsigned char *code = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (code == MAP_FAILED) return 1;
    memcpy(code, inner, sizeof inner);
    memcpy(code + OUTER, outer, sizeof outer);
    char path[64];
    snprintf(path, sizeof path, "/tmp/perf-%d.map", getpid());
    FILE *f = fopen(path, "w");
    if (!f) return 1;
    fprintf(f, "%lx %zx jit_inner\n", (unsigned long)code, sizeof inner);
    fprintf(f, "%lx %zx jit_outer\n", (unsigned long)(code + OUTER), sizeof outer);
    fclose(f);
    void (*run)(void) = (void (*)(void))(code + OUTER);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        for (int i = 0; i < 100; i++) run();
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 < secs);
    /* Left for the profiler to read after we exit, as Node leaves its map;
     * the test removes it. */
    return 0;
}
