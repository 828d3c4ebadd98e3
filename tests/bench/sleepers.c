// N sleeping processes for the watch benchmark (tests/bench/watch_cost.sh),
// forked from this one without exec (copies of one small process, not N
// shells): each pauses until it dies with its parent (PR_SET_PDEATHSIG),
// so killing this one ends them all. Prints "ready N" once all are up.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 10000, started = 0;
	pid_t parent = getpid();

	for (; started < n; started++) {
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork");
			break;
		}
		if (pid == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != parent)
				_exit(0);
			for (;;)
				pause();
		}
	}
	printf("ready %d\n", started);
	fflush(stdout);
	for (;;)
		pause();
}
