import SwoopTestSupport
import Testing
@testable import SwoopCore

/// One generated head and what its fields mean.
struct FuzzedHead: CustomStringConvertible {
    /// What a Content-Range value says, as the generator built it.
    enum RangeMeaning: Equatable {
        /// `bytes first-last/total` written correctly (`total` nil for `*`); not necessarily consistent.
        case range(first: Int64, last: Int64, total: Int64?)
        /// `bytes */total`.
        case unsatisfied(total: Int64)
        case malformed
    }

    var status: Int
    var fields: [(name: String, value: String)] = []
    var contentRanges: [(value: String, meaning: RangeMeaning)] = []
    /// Content-Length values and their numbers (nil when not a plain decimal).
    var contentLengths: [(value: String, number: Int64?)] = []
    var etags: [String] = []
    var lastModifieds: [String] = []
    var encodings: [String] = []
    var contentTypes: [String] = []
    var locations: [String] = []
    var transferEncodings: [String] = []

    var head: ResponseHead { ResponseHead(status: status, fields: fields) }

    var description: String { "\(status) " + fields.map { "\($0.name): \($0.value)" }.joined(separator: " | ") }

    enum SegmentVerdict {
        case accept
        case reject(String)
        case knownIssue(String)
    }

    /// Values of one field that disagree (a server sending two different answers).
    private static func conflicting(_ values: [String]) -> Bool { Set(values).count > 1 }

    /// The stored coding the Content-Encoding fields name: their codings in order, without
    /// `identity`; `identity` when there are none.
    private var coding: String {
        // In the order the fields are sent (the generator may shuffle them).
        let codings = fields.filter { $0.name.lowercased() == "content-encoding" }.map(\.value)
            .flatMap { $0.split(separator: ",") }
            .map { String($0).trimmed(of: " \t").lowercased() }
            .filter { !$0.isEmpty && $0 != "identity" }
        return codings.isEmpty ? "identity" : codings.joined(separator: ", ")
    }

    private var singleRange: RangeMeaning? {
        guard let first = contentRanges.first, !Self.conflicting(contentRanges.map(\.value)) else { return nil }
        return first.meaning
    }

    private var singleLength: (present: Bool, number: Int64?) {
        guard let first = contentLengths.first else { return (false, nil) }
        return (true, Self.conflicting(contentLengths.map(\.value)) ? nil : first.number)
    }

    private static func isMultipart(_ type: String) -> Bool { type.lowercased().hasPrefix("multipart/byteranges") }

    /// The oracle for a segment response.
    func segmentVerdict(requested: ByteRange, object: RemoteObject) -> SegmentVerdict {
        // A 200 that says with Content-Range it is partial is read like a 206.
        guard status == 206 || (status == 200 && !contentRanges.isEmpty) else { return .reject("status \(status)") }
        for (name, values) in [
            ("content-range", contentRanges.map(\.value)), ("content-length", contentLengths.map(\.value)),
            ("etag", etags), ("content-type", contentTypes),
        ] where Self.conflicting(values) {
            return .reject("conflicting \(name)")
        }
        guard case .range(let first, let last, let total)? = singleRange else {
            return .reject("no usable Content-Range")
        }
        // From the first byte asked for: all of it, or fewer (a server that caps its responses).
        guard first == requested.lowerBound, first <= last, last < requested.upperBound else {
            return .reject("other bytes")
        }
        guard total == object.size else { return .reject("other total") }
        let length = singleLength
        if length.present && length.number != last + 1 - first { return .reject("Content-Length") }
        // Identity: other validators are accepted (the bytes decide, by overlap); a strong ETag
        // that stops coming proves nothing and is refused.
        if let expected = object.etag, !expected.hasPrefix("W/"), etags.first == nil {
            return .reject("strong ETag missing")
        }
        if contentTypes.contains(where: Self.isMultipart) { return .reject("multipart") }
        // The bytes are kept as stored: every response must name the coding the probe saw.
        if let stored = object.contentCoding, stored != coding {
            return .reject("content coding \(coding), not \(stored)")
        }
        return .accept
    }

    enum ProbeVerdict {
        case result(ResponseValidator.ProbeResult)
        case refuse(String)
        /// A known weakness: the validator may return `value` (when given) instead of refusing.
        case knownIssue(String, ResponseValidator.ProbeResult?)
    }

    /// The oracle for a probe response.
    func probeVerdict(requested: RequestedRange, url: RemoteURL) -> ProbeVerdict {
        let singleValued = !["content-range", "content-length", "etag", "content-type"].contains { name in
            switch name {
            case "content-range": Self.conflicting(contentRanges.map(\.value))
            case "content-length": Self.conflicting(contentLengths.map(\.value))
            case "content-type": Self.conflicting(contentTypes)
            default: Self.conflicting(etags)
            }
        }
        let etag = Self.conflicting(etags) ? nil : etags.first
        let lastModified = Self.conflicting(lastModifieds) ? nil : lastModifieds.first
        switch status {
        case 206, 200 where !contentRanges.isEmpty:
            guard singleValued else { return .refuse("conflicting fields") }
            guard case .range(let first, let last, let total?)? = singleRange else {
                return .refuse("no Content-Range with a total")
            }
            guard first <= last, last < total else { return .refuse("inconsistent Content-Range") }
            let upper: Int64
            switch requested {
            case .bounded(let asked): upper = min(asked.upperBound, total)
            case .from: upper = total
            }
            guard first == requested.lowerBound, last + 1 <= upper else { return .refuse("other bytes") }
            let length = singleLength
            if length.present && length.number != last + 1 - first { return .refuse("Content-Length") }
            var object = RemoteObject(
                url: url, size: total, etag: etag, lastModified: lastModified, acceptsRanges: true,
                contentCoding: coding)
            object.contentType = contentTypes.first
            if contentTypes.contains(where: Self.isMultipart) { return .refuse("multipart") }
            return .result(.partial(object, ByteRange(first, last + 1)))
        case 200:
            guard singleValued else { return .refuse("conflicting fields") }
            let chunked =
                !Self.conflicting(transferEncodings)
                && transferEncodings.first?.lowercased().contains("chunked") == true
            let length = singleLength
            var object = RemoteObject(
                url: url, size: chunked ? nil : length.number, etag: etag, lastModified: lastModified,
                acceptsRanges: false, contentCoding: coding)
            object.contentType = contentTypes.first
            if length.present && length.number == nil { return .refuse("malformed Content-Length") }
            return .result(.whole(object))
        case 416:
            guard singleValued else { return .refuse("conflicting fields") }
            // Without Content-Range the size is unknown (Apache httpd, lighttpd); one that is there must be */total.
            guard !contentRanges.isEmpty else { return .result(.unsatisfiable(total: nil, etag: etag)) }
            guard case .unsatisfied(let total)? = singleRange else { return .refuse("416 without */total") }
            return .result(.unsatisfiable(total: total, etag: etag))
        case 301, 302, 303, 307, 308:
            guard let location = locations.first, !Self.conflicting(locations), !location.isEmpty else {
                return .refuse("redirect without Location")
            }
            return .result(.redirect(location: location))
        case 412:
            return .result(.preconditionFailed)
        default:
            return .refuse("status \(status)")
        }
    }
}
