/*
 * The file system's own limit for a list of small files, made durable the way Swoop publishes
 * them (Sources/SwoopStore/Finalize: Finalizer.write and Finalizer.commit, PublishQueue): for each group of
 * files, each is created unnamed (O_TMPFILE) in the target directory, written in one write,
 * given the completed-object record as an extended attribute, then the group is made durable
 * with one syncfs, each file linked at its name (linkat of its descriptor, AT_EMPTY_PATH, or of
 * /proc/self/fd/N where the kernel refuses that, as Swoop does: never replacing), and
 * the directory fsync'ed once. No network, no parsing, no hashing: what is left is the kernel's
 * and the disk's work for the same files.
 *
 *   fslimit DIR COUNT SIZE [GROUP [PATTERN]]
 *
 * Writes COUNT files of SIZE bytes named f000000 ... into DIR (which must exist and be empty),
 * GROUP at a time (default 256, PublishQueue.batchLimit). PATTERN `curl` writes them as curl
 * writes a list's files instead, for comparison: each created at its name (open with O_CREAT and
 * O_TRUNC), written once and closed, and one syncfs at the end (the harness's sync after a peer);
 * nothing is durable before that, and a crash can leave a short file at a name. Prints one line:
 *   files=COUNT bytes=TOTAL wall=SECONDS user=SECONDS sys=SECONDS
 * Written here for the benchmark (issue 57); Linux only.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what, const char *path) {
    fprintf(stderr, "fslimit: %s %s: %s\n", what, path, strerror(errno));
    exit(1);
}

/* Curl's way: each file created at its name, written and closed; one syncfs at the end. */
static void write_as_curl(int dirfd, const char *dir, long count, const char *body, long size) {
    for (long i = 0; i < count; i++) {
        char name[32];
        snprintf(name, sizeof name, "f%06ld", i);
        int fd = openat(dirfd, name, O_CREAT | O_WRONLY | O_TRUNC, 0644);
        if (fd < 0) die("cannot create", name);
        if (size && write(fd, body, size) != size) die("cannot write", name);
        close(fd);
    }
    if (syncfs(dirfd) != 0) die("cannot syncfs", dir);
}

/* Swoop's way: GROUP unnamed files written and given the record, one syncfs, their links, one
 * directory fsync. */
static void write_as_swoop(int dirfd, const char *dir, long count, long group, const char *body, long size,
                           const char *record, int recordLength) {
    int *fds = malloc(sizeof(int) * group);
    for (long first = 0; first < count; first += group) {
        long n = count - first < group ? count - first : group;
        for (long i = 0; i < n; i++) {
            int fd = open(dir, O_TMPFILE | O_WRONLY, 0644);
            if (fd < 0) die("cannot create an unnamed file in", dir);
            if (size && write(fd, body, size) != size) die("cannot write in", dir);
            if (fsetxattr(fd, "user.swoop.object", record, recordLength, 0) != 0 && errno != ENOTSUP)
                die("cannot set an attribute in", dir);
            fds[i] = fd;
        }
        if (syncfs(fds[0]) != 0) die("cannot syncfs", dir);
        for (long i = 0; i < n; i++) {
            char from[64], name[32];
            snprintf(name, sizeof name, "f%06ld", first + i);
            if (linkat(fds[i], "", dirfd, name, AT_EMPTY_PATH) != 0) {
                snprintf(from, sizeof from, "/proc/self/fd/%d", fds[i]);
                if ((errno != ENOENT && errno != EPERM) || linkat(AT_FDCWD, from, dirfd, name, AT_SYMLINK_FOLLOW) != 0)
                    die("cannot link", name);
            }
            close(fds[i]);
        }
        if (fsync(dirfd) != 0) die("cannot fsync", dir);
    }
    free(fds);
}

static double seconds(struct timeval tv) { return tv.tv_sec + tv.tv_usec / 1e6; }

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: fslimit DIR COUNT SIZE [GROUP [PATTERN]]\n");
        return 2;
    }
    const char *dir = argv[1];
    long count = atol(argv[2]), size = atol(argv[3]), group = argc > 4 ? atol(argv[4]) : 256;
    const char *pattern = argc > 5 ? argv[5] : "swoop";
    if (count <= 0 || size < 0 || group <= 0) {
        fprintf(stderr, "fslimit: COUNT and GROUP must be positive, SIZE not negative\n");
        return 2;
    }
    if (strcmp(pattern, "swoop") != 0 && strcmp(pattern, "curl") != 0) {
        fprintf(stderr, "fslimit: PATTERN is swoop or curl, not %s\n", pattern);
        return 2;
    }
    char *body = malloc(size ? size : 1);
    for (long i = 0; i < size; i++) body[i] = (char)(i * 2654435761u >> 13);
    /* Swoop's record as it writes it (CompletedObject: `s2`, the size and the ETag nginx sends, on
     * three lines; 23 bytes at 4 KiB), which fits in an ext4 inode's own attribute space. The record
     * this had before (83 bytes, the older JSON-like form) took an attribute block instead, a cost
     * Swoop no longer pays. */
    char record[64];
    int recordLength = snprintf(record, sizeof record, "s2\n%ld\n\"6b1691b3-%lx\"", size, size);
    int dirfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dirfd < 0) die("cannot open", dir);
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    if (strcmp(pattern, "curl") == 0)
        write_as_curl(dirfd, dir, count, body, size);
    else
        write_as_swoop(dirfd, dir, count, group, body, size, record, recordLength);
    clock_gettime(CLOCK_MONOTONIC, &end);
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    printf("files=%ld bytes=%ld wall=%.4f user=%.4f sys=%.4f\n", count, count * size,
           (end.tv_sec - start.tv_sec) + (end.tv_nsec - start.tv_nsec) / 1e9, seconds(usage.ru_utime),
           seconds(usage.ru_stime));
    return 0;
}
