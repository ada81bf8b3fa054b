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
