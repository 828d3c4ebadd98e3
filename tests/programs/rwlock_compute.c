/* WRITERS threads (default 2) take one rwlock for writing and compute
 * while holding it (about 2 ms of arithmetic); READERS threads (default 2)
 * take it for reading to compute the same: at any moment one writer works,
 * or the readers do, and the rest wait for the lock in futex. */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;
static volatile unsigned long shared;

static void compute(void) {
    unsigned long x = shared;
    for (unsigned long i = 0; i < 2000000; i++)
        x = x * 6364136223846793005UL + i;
    shared = x;
}

static void *writer(void *arg) {
    (void)arg;
    for (;;) {
        pthread_rwlock_wrlock(&lock);
        compute();
        pthread_rwlock_unlock(&lock);
    }
    return NULL;
}

static void *reader(void *arg) {
    (void)arg;
    for (;;) {
        pthread_rwlock_rdlock(&lock);
        compute();
        pthread_rwlock_unlock(&lock);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int writers = argc > 1 ? atoi(argv[1]) : 2, readers = argc > 2 ? atoi(argv[2]) : 2;
    pthread_t t;
    for (int i = 0; i < writers; i++)
        pthread_create(&t, NULL, writer, NULL);
    for (int i = 0; i < readers; i++)
        pthread_create(&t, NULL, reader, NULL);
    for (;;)
        pause(); /* not pthread_exit: a zombie leader reads as blocked */
}
