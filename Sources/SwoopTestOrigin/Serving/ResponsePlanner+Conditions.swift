import NIOHTTP1

/// What the request's conditions decide: its preconditions, and the range it is answered with.
extension ResponsePlanner {
    // MARK: Preconditions (RFC 9110 §13.2.2 order)

    /// 412 or 304 when a precondition decides the response, nil to go on.
    func evaluatePreconditions(etag: EntityTag?, lastModified: Int64?) -> HTTPResponseStatus? {
        if let field = request.headers.first(name: "If-Match") {
            // A malformed list cannot match, so it fails like a non-matching one.
            switch EntityTagList.parse(Substring(field)) {
            case .any?:
                break  // the object exists
            case .tags(let tags)?:
                guard let etag, tags.contains(where: { $0.strongMatches(etag) }) else { return .preconditionFailed }
            case nil:
                return .preconditionFailed
            }
        } else if let field = request.headers.first(name: "If-Unmodified-Since"),
            let date = HTTPDate.parse(field), let lastModified, lastModified > date
        {
            return .preconditionFailed
        }

        let isRead = request.method == .GET || request.method == .HEAD
        if let field = request.headers.first(name: "If-None-Match") {
            let matches: Bool
            switch EntityTagList.parse(Substring(field)) {
            case .any?: matches = true
            case .tags(let tags)?: matches = etag.map { etag in tags.contains { $0.weakMatches(etag) } } ?? false
            case nil: matches = false
            }
            if matches { return isRead ? .notModified : .preconditionFailed }
        } else if isRead, let field = request.headers.first(name: "If-Modified-Since"),
            let date = HTTPDate.parse(field), let lastModified, lastModified <= date
        {
            return .notModified
        }
        return nil
    }

    /// `If-Range` (RFC 9110 §13.1.5): the range is honoured only if the validator still matches
    /// (a strong ETag by strong comparison, or exactly the Last-Modified date).
    func ifRangeAllowsRange(etag: EntityTag?, lastModified: Int64?) -> Bool {
        guard let field = request.headers.first(name: "If-Range") else { return true }
        let value = field.trimmingHTTPWhitespace()
        if value.hasPrefix("\"") || value.hasPrefix("W/") {
            guard let given = EntityTag(parsing: value), let etag else { return false }
            return given.strongMatches(etag)
        }
        guard let date = HTTPDate.parse(String(value)), let lastModified else { return false }
        return date == lastModified
    }

    // MARK: Ranges (RFC 9110 §14)

    /// What a request's `Range` selects.
    enum RangeChoice {
        /// The whole object: no `Range`, one that is ignored, or an `If-Range` that does not match.
        case whole
        case part(ClosedRange<Int64>)
        /// Answered with `416`, already in the plan.
        case unsatisfiable
    }

    /// Resolves `Range` against the declared size, applying the range switches (no ranges, the
    /// refusal of small objects, the cap).
    func chooseRange(
        _ field: String?, size: Int64, etag: EntityTag?, lastModified: Int64?, _ plan: inout ResponsePlan
    ) -> RangeChoice {
        guard let field else { return .whole }
        guard faults.rangeSupport else {
            plan.faults.append("noRanges")
            return .whole
        }
        if let refusal = faults.rangeRefusal, size <= refusal.objectsUpTo {
            plan.head.status = .rangeNotSatisfiable
            if refusal.withContentRange { plan.head.headers.add(name: "Content-Range", value: "bytes */\(size)") }
            plan.faults.append("refuse416")
            return .unsatisfiable
        }
        guard ifRangeAllowsRange(etag: etag, lastModified: lastModified),
            let requested = ByteRangeRequest(parsing: field)
        else { return .whole }
        guard let resolved = requested.resolve(size: size) else {
            plan.head.status = .rangeNotSatisfiable
            plan.head.headers.add(name: "Content-Range", value: "bytes */\(size)")
            return .unsatisfiable
        }
        if let cap = faults.rangeCapBytes.map({ max(1, $0) }), resolved.upperBound - resolved.lowerBound + 1 > cap {
            plan.faults.append("rangeCapped")
            return .part(resolved.lowerBound...(resolved.lowerBound + cap - 1))
        }
        return .part(resolved)
    }
}
