/* The workload of tests/bench/wall_cost.sh: two threads hand a turn to
 * each other TRIPS times through a mutex and a condition variable (two
 * sleeps and two wake-ups per trip: what the off-CPU half and the wakers
 * trace), computing about SPIN iterations on each turn (what the CPU half
 * samples). Prints the process's CPU time (user + system, seconds), which
 * includes the BPF programs' time: the kernel charges it to the task
 * switching or waking. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static int turn;
static long trips, spin;
static volatile unsigned long sink;

static void *player(void *arg) {
    int me = (int)(long)arg;
    for (long i = 0; i < trips; i++) {
        pthread_mutex_lock(&m);
        while (turn != me)
            pthread_cond_wait(&c, &m);
        for (long j = 0; j < spin; j++)
            sink = sink * 6364136223846793005UL + j;
        turn = !me;
        pthread_cond_signal(&c);
        pthread_mutex_unlock(&m);
    }
    return NULL;
}

int main(int argc, char **argv) {
    trips = argc > 1 ? atol(argv[1]) : 50000;
    spin = argc > 2 ? atol(argv[2]) : 20000;
    pthread_t a, b;
    pthread_create(&a, NULL, player, (void *)0L);
    pthread_create(&b, NULL, player, (void *)1L);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("cpu %.6f\n", ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
                             ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6);
    return 0;
}
