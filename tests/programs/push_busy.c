/* A busy program for tests/watch_profiles.rs: computes in push_spin()
 * for 40 ms, then sleeps 10 ms in nanosleep, forever: on-CPU samples under
 * push_spin, off-CPU time in nanosleep. */
#include <time.h>

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

__attribute__((noinline)) double push_spin(double ms)
{
	volatile double x = 0;
	double end = now() + ms / 1000;
	while (now() < end)
		for (int i = 0; i < 1000; i++)
			x += i * 0.5;
	return x;
}

int main(void)
{
	struct timespec nap = {0, 10 * 1000 * 1000};
	for (;;) {
		push_spin(40);
		nanosleep(&nap, 0);
	}
}
