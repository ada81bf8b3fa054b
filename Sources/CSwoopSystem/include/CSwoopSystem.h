#ifndef SWOOP_CSWOOPSYSTEM_H
#define SWOOP_CSWOOPSYSTEM_H

#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <sys/types.h>

// Linux system calls that Swift's Glibc module does not expose (they need _GNU_SOURCE or
// <sys/xattr.h>). Each returns what the system call returns and leaves errno set on failure.

/// fallocate(fd, 0, offset, length): reserve blocks; -1/EOPNOTSUPP where the file system cannot.
int swoop_fallocate(int fd, int64_t offset, int64_t length);

/// renameat2(from, to, RENAME_NOREPLACE): an atomic rename that fails with EEXIST instead of
/// replacing `to`. -1/EINVAL or ENOSYS where the kernel or file system lacks it.
int swoop_rename_noreplace(const char *from, const char *to);

/// An exclusive lock on the one byte at `offset` of the file open at `fd`, owned by that open file
/// (an "open file description" lock: dropped when its last descriptor closes, whatever else the
/// process closes), waiting for it when `wait` is non-zero. 0, or -1 with errno (EAGAIN: held).
int swoop_lock_byte(int fd, int64_t offset, int wait);

/// setxattr(path, name, value, size, 0).
int swoop_setxattr(const char *path, const char *name, const void *value, size_t size);

/// fsetxattr(fd, name, value, size, 0).
int swoop_fsetxattr(int fd, const char *name, const void *value, size_t size);

/// syncfs(fd): writes back every dirty page and pending metadata change of the file system that
/// holds `fd`, and waits. One call makes many newly written files durable at once.
int swoop_syncfs(int fd);

/// open(directory, O_TMPFILE | O_RDWR | O_CLOEXEC, 0666): a new file with no name in `directory`,
/// freed if the process dies before it is linked. -1/EOPNOTSUPP (or EISDIR, EINVAL) where the file
/// system or kernel lacks O_TMPFILE.
int swoop_open_unnamed(const char *directory);

/// linkat(fd, "", AT_FDCWD, target, AT_EMPTY_PATH), or where the kernel refuses that,
/// linkat(AT_FDCWD, "/proc/self/fd/FD", AT_FDCWD, target, AT_SYMLINK_FOLLOW): gives the unnamed
/// file `fd` the name `target`, atomically; -1/EEXIST if `target` exists (nothing is replaced).
int swoop_link_unnamed(int fd, const char *target);

/// statfs(path).f_type: the file system's magic number (PROC_SUPER_MAGIC, SYSFS_MAGIC, ...), or
/// -1 with errno set.
int64_t swoop_file_system_type(const char *path);

/// getxattr(path, name, value, size).
ssize_t swoop_getxattr(const char *path, const char *name, void *value, size_t size);

/// sync_file_range(fd, offset, length, SYNC_FILE_RANGE_WRITE): start writing dirty pages back
/// without waiting, so a later fsync has less left to do. Not a durability guarantee.
int swoop_start_writeback(int fd, int64_t offset, int64_t length);

/// malloc_trim(0) where the C library is glibc: gives the free pages inside its heaps back to the
/// system (glibc keeps freed memory mapped, in one heap per thread that allocates). 1 if memory
/// was released, 0 if none was or the C library has no such call.
int swoop_release_free_memory(void);

/// mallopt(M_ARENA_MAX, count) where the C library is glibc: at most `count` heaps, which the
/// threads that allocate share (glibc makes one per thread that allocates, up to eight per core,
/// each keeping its own freed memory). 1 if set, 0 if not or the C library has no such call.
int swoop_limit_heaps(int count);

/// pthread_setname_np(thread, name): names a thread for debuggers and `top -H` (15 chars max).
int swoop_set_thread_name(pthread_t thread, const char *name);

/// Whether swoop_clmul_fold can run here (x86-64 with PCLMULQDQ and SSE4.1).
int swoop_has_clmul(void);

/// For a reflected 64-bit CRC: XORs `reg` into the first 8 bytes of `data`, then folds the first
/// `length` bytes (a multiple of 16, at least 16) into 16 bytes written to `out16`, whose CRC
/// from a zero register equals the register the whole would leave. `k_first`, `k_second`: x^191
/// and x^127 modulo the polynomial, reflected (the products come out one bit short).
void swoop_clmul_fold(uint64_t reg, const void *data, size_t length, uint64_t k_first, uint64_t k_second, void *out16);

#endif
