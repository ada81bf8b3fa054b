/* rusage-exec: runs a command and reports its own rusage, so the peak RSS is the tool's.
 *
 *   rusage-exec REPORT_FILE COMMAND [ARGS...]
 *
 * Why: a process exec'd from a forked Python inherits, in its ru_maxrss, the resident size of the
 * Python image it replaced (the kernel keeps the old mm's high-water mark across execve), so
 * os.wait4 on a direct child of the harness never reports less than the harness's own ~15-30 MiB.
 * This launcher is tiny: the command it forks starts from its ~1 MiB image instead.
 *
 * Writes "exit_code wall_ns user_us sys_us maxrss_kib" to REPORT_FILE after the command exits and
 * exits with the command's status (128+signal if it was killed). SIGTERM/SIGINT/SIGHUP are passed
 * on to the command (followed by SIGKILL 3 s later if it is still running), and the command gets
 * SIGKILL if this launcher dies (PR_SET_PDEATHSIG).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile pid_t child = -1;

static void forward(int sig) {
    if (child > 0) kill(child, sig);
    alarm(3);  /* a command that ignores the signal gets SIGKILL in 3 s; this launcher still reaps it */
}

static void escalate(int sig) {
    (void)sig;
    if (child > 0) kill(child, SIGKILL);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s REPORT_FILE COMMAND [ARGS...]\n", argv[0]);
        return 125;
    }
    struct timespec t0, t1;
    pid_t parent = getpid();
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); return 125; }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(125);
        execvp(argv[2], argv + 2);
        fprintf(stderr, "rusage-exec: cannot run %s: %s\n", argv[2], strerror(errno));
        _exit(127);
    }
    child = pid;
    struct sigaction sa = {0};
    sa.sa_handler = forward;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sa.sa_handler = escalate;
    sigaction(SIGALRM, &sa, NULL);
    int status = 0;
    struct rusage ru;
    pid_t r;
    do { r = wait4(pid, &status, 0, &ru); } while (r < 0 && errno == EINTR);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (r < 0) { perror("wait4"); return 125; }
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    long long wall = (long long)(t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec);
    FILE *f = fopen(argv[1], "w");
    if (!f) { perror(argv[1]); return 125; }
    fprintf(f, "%d %lld %lld %lld %ld\n", code, wall,
            (long long)ru.ru_utime.tv_sec * 1000000LL + ru.ru_utime.tv_usec,
            (long long)ru.ru_stime.tv_sec * 1000000LL + ru.ru_stime.tv_usec, ru.ru_maxrss);
    fclose(f);
    return code;
}
