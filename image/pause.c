/*
 * The pod sandbox's "pause" process, for the end-to-end tests' real node (tests/src/node.rs): it holds the pod's
 * namespaces open, reaps zombies (it is PID 1 when the pod shares its PID namespace) and exits on SIGINT/SIGTERM.
 * The same job as Kubernetes' build/pause/linux/pause.c; built here, statically, because CI cannot pull
 * registry.k8s.io/pause.
 */
#include <signal.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_shutdown(int signo) {
    (void)signo;
    _exit(0);
}

static void on_child(int signo) {
    (void)signo;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

int main(void) {
    struct sigaction shutdown = {.sa_handler = on_shutdown};
    struct sigaction reap = {.sa_handler = on_child, .sa_flags = SA_NOCLDSTOP};
    if (sigaction(SIGINT, &shutdown, NULL) < 0 || sigaction(SIGTERM, &shutdown, NULL) < 0 ||
        sigaction(SIGCHLD, &reap, NULL) < 0) {
        return 1;
    }
    for (;;) {
        pause();
    }
}
