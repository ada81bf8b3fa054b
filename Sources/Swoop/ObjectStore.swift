import SwoopCurl
import SwoopCore

/// A kind of name the downloader reaches through a service rather than as a URL
/// (`s3://BUCKET/KEY`): it turns the name into the object's HTTPS URL, named as given in every
/// message and in the segment map, and the ``ObjectService`` that authorizes its requests and reads
/// its errors. Below the `Downloader`, such an object is a URL like any other.
///
/// A new kind is its own folder beside `S3/` (its conformance, its service, its pure parts), a
/// field in ``Downloader/Configuration``, and one line in ``ObjectStores/kinds``.
protocol ObjectStore: Sendable {
    /// The scheme of its names, lowercase (`s3`).
    static var scheme: String { get }

    /// Made once per downloader (credentials read once and shared by its downloads).
    init()

    /// The key `name` names (`data/big.bin` in `s3://bucket/data/big.bin`), as given; `nil` when
    /// `name` is not a valid name of this kind.
    static func key(of name: String) -> String?

    /// The object `name` names, with `configuration`'s settings: its URL, named `name`, and the
    /// service for its requests.
    func object(
        _ name: String, configuration: Downloader.Configuration
    ) throws(DownloadError) -> (url: RemoteURL, service: any ObjectService)
}

/// The object stores a downloader reaches by name: every scheme besides `http` and `https`.
struct ObjectStores: Sendable {
    /// Every kind; a new one is a line here.
    static let kinds: [any ObjectStore.Type] = [S3Access.self]

    /// The schemes of every kind, for messages (`["s3"]`).
    static var schemes: [String] { kinds.map { $0.scheme } }

    /// The kind whose scheme `name` starts with (compared without case), if any.
    static func kind(of name: String) -> (any ObjectStore.Type)? {
        kinds.first { named(name, scheme: $0.scheme) }
    }

    /// Whether `name` starts with `scheme` (lowercase ASCII) in any case, then `://`: compared in
    /// place, since every URL of a list is asked (lowercasing its scheme into a new string cost 1.5k
    /// instructions a file).
    private static func named(_ name: String, scheme: String) -> Bool {
        var bytes = name.utf8.makeIterator()
        for expected in scheme.utf8 where bytes.next().map(ASCIIBytes.lowercased) != expected {
            return false
        }
        return bytes.next() == UInt8(ascii: ":") && bytes.next() == UInt8(ascii: "/")
            && bytes.next() == UInt8(ascii: "/")
    }

    /// One of each kind, made for one downloader.
    let all: [any ObjectStore] = kinds.map { $0.init() }

    /// This downloader's store for `name`, if a store's scheme names it.
    func store(for name: String) -> (any ObjectStore)? {
        guard let kind = Self.kind(of: name) else { return nil }
        return all.first { type(of: $0) == kind }
    }
}
