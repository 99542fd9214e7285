// maxrss CMD ARGS...: runs CMD (its output to /dev/null) and prints its
// wall time and peak RSS: "0.0421 s 14.37 MiB rc=0".
//
// Why not run_measured.py: Linux carries the high-water RSS of the memory a
// child had before exec into its ru_maxrss, and a child that Python spawns
// (vfork, then exec) starts in Python's own memory, so every peak it reports
// is at least Python's (about 15.4 MiB on the GPU host: `tracer version`
// and `python3 -c "import pickle"` both read 15.4 there). A small static
// parent adds about 1 MiB. Build: gcc -O2 -static -o maxrss maxrss.c
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <fcntl.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/wait.h>
int main(int argc, char **argv) {
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pid_t p = fork();
	if (p == 0) {
		int fd = open("/dev/null", O_WRONLY);
		dup2(fd, 1); dup2(fd, 2);
		execvp(argv[1], argv + 1);
		_exit(127);
	}
	int st; struct rusage ru;
	wait4(p, &st, 0, &ru);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("%.4f s %.2f MiB rc=%d\n", (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9, ru.ru_maxrss / 1024.0, WEXITSTATUS(st));
	return 0;
}
