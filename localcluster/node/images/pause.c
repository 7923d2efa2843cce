/* The sandbox ("pause") container's process: holds the pod's namespaces, reaps
 * orphaned children, and exits on SIGTERM or SIGINT. Built static, so the image is
 * this one file. Our own minimal program, for a node with no registry to pull from. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void quit(int sig) { (void)sig; _exit(0); }
static void reap(int sig) { (void)sig; while (waitpid(-1, NULL, WNOHANG) > 0) {} }

int main(void) {
  struct sigaction sa = {0};
  sa.sa_handler = quit;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sa.sa_handler = reap;
  sa.sa_flags = SA_NOCLDSTOP;
  sigaction(SIGCHLD, &sa, NULL);
  for (;;) pause();
}
