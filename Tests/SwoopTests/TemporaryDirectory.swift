import FoundationEssentials
import SwoopCore

#if canImport(Glibc)
import Glibc
#endif

/// A new directory under `/tmp` for one test, named `PREFIX-XXXXXX`; ``remove()`` deletes the
/// files in it, then the directory.
struct TemporaryDirectory {
    let path: String

    init(_ prefix: String) throws {
        var template = Array("/tmp/\(prefix)-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw DownloadError(.localIO, "mkdtemp failed") }
        path = String(cString: made)
    }

    func remove() {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] {
            unlink(path + "/" + name)
        }
        rmdir(path)
    }
}
