// watch-dir DIR: prints one line per entry created or moved into DIR, "<ms> <event> <name>",
// <ms> the CLOCK_MONOTONIC time it was read (the host's clock: the bench compares it with its
// own), as a Kubernetes volume reloader sees them (the kubelet publishes a downwardAPI volume's new
// contents by renaming ..data_tmp over ..data). In the test image, beside busybox, whose
// Debian build lacks inotifyd.
#include <stdio.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: watch-dir DIR\n");
    return 2;
  }
  int fd = inotify_init1(0);
  if (fd < 0 || inotify_add_watch(fd, argv[1], IN_CREATE | IN_MOVED_TO) < 0) {
    perror("watch-dir");
    return 1;
  }
  char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) return 1;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double ms = ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
    for (char *p = buf; p < buf + n;) {
      struct inotify_event *ev = (struct inotify_event *)p;
      if (ev->len > 0) printf("%.3f %s %s\n", ms, (ev->mask & IN_MOVED_TO) ? "moved_to" : "create", ev->name);
      p += sizeof(struct inotify_event) + ev->len;
    }
    fflush(stdout);
  }
}
