/* One thread in three parts of SECS seconds each (default 1), each under
 * its own function: compute_part spins on the CPU, sleep_part sleeps in
 * nanosleep, read_part reads FILE with O_DIRECT (4 KiB at random offsets,
 * from the disk, never the page cache). The blocking calls sit one
 * function further in (sleep_once, read_once): a frame-pointer walk from
 * inside a libc wrapper skips its caller, so the part itself stays seen.
 * Built -O1 -fno-omit-frame-pointer. Usage: wall_parts FILE [SECS] */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *path;
static double secs = 1.0;
static volatile unsigned long sink;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

__attribute__((noinline)) static void compute_part(void) {
    double end = now() + secs;
    while (now() < end)
        for (unsigned long i = 0; i < 100000; i++)
            sink = sink * 6364136223846793005UL + i;
}

__attribute__((noinline)) static void sleep_once(double s) {
    struct timespec t = {(time_t)s, (long)((s - (time_t)s) * 1e9)};
    nanosleep(&t, NULL);
}

__attribute__((noinline)) static void sleep_part(void) {
    sleep_once(secs);
}

__attribute__((noinline)) static void read_once(int fd, void *buf, off_t off) {
    if (pread(fd, buf, 4096, off) != 4096) {
        perror("pread");
        exit(1);
    }
}

__attribute__((noinline)) static void read_part(void) {
    int fd = open(path, O_RDONLY | O_DIRECT);
    if (fd < 0) {
        perror(path);
        exit(1);
    }
    off_t blocks = lseek(fd, 0, SEEK_END) / 4096;
    void *buf;
    if (posix_memalign(&buf, 4096, 4096) != 0)
        exit(1);
    unsigned long r = 88172645463325252UL;
    double end = now() + secs;
    while (now() < end) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        read_once(fd, buf, (off_t)(r % blocks) * 4096);
    }
    close(fd);
}

static void *worker(void *arg) {
    (void)arg;
    compute_part();
    sleep_part();
    read_part();
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: wall_parts FILE [SECS]\n");
        return 2;
    }
    path = argv[1];
    if (argc > 2)
        secs = atof(argv[2]);
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_setname_np(t, "parts");
    pthread_join(t, NULL);
    return 0;
}
