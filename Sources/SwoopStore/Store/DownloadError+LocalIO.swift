import CSwoopSystem
import SwoopCore
import SystemPackage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension DownloadError {
    /// A failed system call on a local file, with the fix for the common causes.
    package static func localIO(_ operation: String, path: String, errno code: Int32) -> DownloadError {
        let cause = String(cString: strerror(code))
        switch code {
        case ENOSPC, EDQUOT:
            return DownloadError(.diskFull, "\(operation) \(path): \(cause)", remedy: .freeSpaceAndResume, errno: code)
        case EACCES, EPERM, EROFS:
            return DownloadError(
                .localIO, "\(operation) \(path): \(cause)", remedy: .chooseWritableLocation, errno: code)
        case EISDIR:
            return DownloadError(.localIO, "\(operation) \(path): it is a directory", remedy: .nameAFile, errno: code)
        case ENOTDIR:
            return DownloadError(
                .localIO, "\(operation) \(path): a part of the path is a file, not a directory",
                remedy: .chooseWritableLocation, errno: code)
        case ENOENT:
            // Set up before the download, the directory existed: something removed it, or the
            // file, meanwhile. Say which; "create the directory" would be wrong for a file.
            let parent = FilePath(path).removingLastComponent()
            let directory = parent.isEmpty ? "." : parent.string
            if let info = try? fileInfo(directory), info.st_mode & S_IFMT == S_IFDIR {
                if isVirtualFileSystem(directory) {
                    return DownloadError(
                        .localIO,
                        "\(operation) \(path): \(directory) is on a virtual file system (such as /proc or /sys), where "
                            + "files cannot be created", remedy: .chooseWritableLocation, errno: code)
                }
                return DownloadError(
                    .localIO, "\(operation) \(path): it no longer exists (something else removed it)", errno: code)
            }
            return DownloadError(
                .localIO,
                "\(operation) \(path): the directory \(directory) no longer exists (something else removed it)",
                errno: code)
        default:
            return DownloadError(.localIO, "\(operation) \(path): \(cause)", errno: code)
        }
    }
}

/// Whether `directory` is on a file system of the kernel's own (procfs, sysfs, cgroups, ...),
/// where a missing file means "cannot be created", not "was removed".
private func isVirtualFileSystem(_ directory: String) -> Bool {
    #if os(Linux)
    let type = swoop_file_system_type(directory)
    guard type >= 0 else { return false }
    let kernelOwned: Set<Int64> = [
        0x9fa0,  // proc
        0x6265_6572,  // sysfs
        0x0027_e0eb,  // cgroup
        0x6367_7270,  // cgroup2
        0x6462_6720,  // debugfs
        0x7472_6163,  // tracefs
        0x7363_6673,  // securityfs
        0x6e73_6673,  // nsfs
        0x1cd1,  // devpts
    ]
    return kernelOwned.contains(type)
    #else
    return false
    #endif
}
