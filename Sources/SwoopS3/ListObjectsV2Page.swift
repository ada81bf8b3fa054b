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
package enum S3KeyPath {
    /// The rest of `key` after `prefix` (and after the `/` that follows a prefix not ending in
    /// one: `logs` is the folder `logs/`), as a relative path; `nil` when it cannot be a safe one:
    /// a key outside the prefix, a directory marker (ending in `/`), an empty, `.` or `..`
    /// segment, a control character.
    package static func relativePath(forKey key: String, underPrefix prefix: String) -> String? {
        guard key.hasPrefix(prefix) else { return nil }
        var rest = key.dropFirst(prefix.count)
        if !prefix.isEmpty && !prefix.hasSuffix("/") && rest.hasPrefix("/") { rest = rest.dropFirst() }
        guard !rest.isEmpty, !rest.hasSuffix("/"), !rest.hasPrefix("/") else { return nil }
        if rest.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) { return nil }
        for segment in rest.split(separator: "/", omittingEmptySubsequences: false) {
            if segment.isEmpty || segment == "." || segment == ".." { return nil }
            if segment.utf8.count > 255 { return nil }
        }
        return String(rest)
    }
}
