/* Sleeps DELAY_MS, then allocates and touches 1 MiB every 10 ms until the
 * OOM killer (or anyone) kills it: in a small memory cgroup, an OOM-killed
 * member of a tree. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    usleep((argc > 1 ? atoi(argv[1]) : 0) * 1000);
    for (;;) {
        char *p = malloc(1 << 20);
        if (p)
            memset(p, 1, 1 << 20);
        usleep(10000);
    }
}
