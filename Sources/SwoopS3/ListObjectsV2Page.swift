import SwoopCore

/// One page of a ListObjectsV2 answer.
package struct ListObjectsV2Page: Sendable, Equatable {
    package struct Object: Sendable, Equatable {
        package var key: String
        package var size: Int64
        package var etag: String?
    }

    package var objects: [Object]
    package var isTruncated: Bool
    package var nextContinuationToken: String?

    /// Reads a `ListBucketResult`; keys are URL-decoded when the answer says `EncodingType` is
    /// `url` (as the request asks, so that any key survives XML).
    package static func parse(_ body: [UInt8]) throws(DownloadError) -> ListObjectsV2Page {
        let document = S3XML(body)
        guard document.contains("ListBucketResult") else {
            let start = String(decoding: body.prefix(120), as: UTF8.self)
            throw DownloadError(.invalidResponse, "the store's listing is not a ListBucketResult: '\(start)'")
        }
        let urlEncoded = document.value("EncodingType")?.lowercased() == "url"
        var objects: [Object] = []
        for element in document.elements("Contents") {
            guard let rawKey = element.value("Key"), let size = element.value("Size").flatMap({ Int64($0) }),
                size >= 0
            else {
                throw DownloadError(.invalidResponse, "the store's listing has an entry without a key or a size")
            }
            let key = urlEncoded ? S3Encoding.decode(rawKey, plusIsSpace: true) : rawKey
            objects.append(Object(key: key, size: size, etag: element.value("ETag")))
        }
        let truncated = document.value("IsTruncated")?.lowercased() == "true"
        let token = document.value("NextContinuationToken").flatMap { $0.isEmpty ? nil : $0 }
        if truncated && token == nil {
            throw DownloadError(
                .invalidResponse, "the store's listing says it is truncated but gives no NextContinuationToken")
        }
        return ListObjectsV2Page(objects: objects, isTruncated: truncated, nextContinuationToken: token)
    }
}

/// Where an object listed under a prefix goes below the directory that receives the prefix.
///
/// Keys are bytes: the prefix is matched and cut byte for byte (`hasPrefix` on `String` compares
/// characters, so a combining mark after the prefix, or another normalization of it, changed
/// the answer), and the rest is kept exactly, never normalized.
package enum S3KeyPath {
    /// What becomes of a listed key.
    package enum Placement: Equatable, Sendable {
        /// A file at this path relative to the directory.
        case file(String)
        /// A directory marker (a key ending in `/`): not a file, nothing to do.
        case directoryMarker
        /// Not downloaded: why.
        case skipped(String)
    }

    /// The rest of `key` after `prefix` (and after the `/` that follows a prefix not ending in
    /// one: `logs` is the folder `logs/`), as a relative path, unless it cannot be a safe one:
    /// a key outside the prefix, an empty, `.` or `..` segment, a segment over 255 bytes, a
    /// control character, or a segment naming Swoop's working directory (``WorkingDirectory``).
    package static func place(key: String, underPrefix prefix: String) -> Placement {
        let slash = UInt8(ascii: "/")
        let keyBytes = Array(key.utf8)
        let prefixBytes = Array(prefix.utf8)
        guard keyBytes.starts(with: prefixBytes) else { return .skipped("it is not under the prefix") }
        var rest = keyBytes[prefixBytes.count...]
        if let last = prefixBytes.last, last != slash, rest.first == slash { rest = rest.dropFirst() }
        if rest.isEmpty || rest.last == slash { return .directoryMarker }
        if rest.first == slash { return .skipped("it starts with '/' (an absolute path)") }
        // Valid UTF-8 cut after a whole scalar (the prefix is valid UTF-8 too): the same bytes.
        let relative = String(decoding: rest, as: UTF8.self)
        if relative.containsControlCharacters { return .skipped("it holds a control character") }
        for segment in rest.split(separator: slash, omittingEmptySubsequences: false) {
            if segment.isEmpty { return .skipped("it has an empty path segment ('//')") }
            if segment.elementsEqual(".".utf8) || segment.elementsEqual("..".utf8) {
                return .skipped("it has a '.' or '..' segment (it would leave the directory)")
            }
            if segment.count > 255 { return .skipped("a segment is longer than 255 bytes") }
            if segment.elementsEqual(WorkingDirectory.name.utf8) {
                return .skipped("it names Swoop's working directory (\(WorkingDirectory.name))")
            }
        }
        return .file(relative)
    }

    /// The relative path of ``place(key:underPrefix:)``'s `.file`, else `nil`.
    package static func relativePath(forKey key: String, underPrefix prefix: String) -> String? {
        if case .file(let path) = place(key: key, underPrefix: prefix) { return path }
        return nil
    }
}
