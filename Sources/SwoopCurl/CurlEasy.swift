import CCurl
import SwoopCore

/// libcurl's process-wide state, initialised once before the first handle.
package enum CurlRuntime {
    private static let initialized: Bool = curl_global_init(Int(CURL_GLOBAL_ALL)) == CURLE_OK

    /// Initialises libcurl if needed; `false` if it could not be.
    package static func ensureInitialized() -> Bool { initialized }

    /// libcurl's version string, e.g. "7.88.1".
    package static var version: String {
        guard let info = curl_version_info(CURLVERSION_FOURTH), let version = info.pointee.version else {
            return "unknown"
        }
        return String(cString: version)
    }
}

/// One libcurl easy handle. Not thread-safe: used only on the transfer thread.
///
/// The setters are typed by the option class curl reads (`long`, `curl_off_t`, a string, a
/// pointer), matching the C shims. The first failing `setopt` is remembered rather than thrown,
/// so a request is configured in one pass and checked once.
package final class CurlEasy {
    package let handle: UnsafeMutableRawPointer
    package private(set) var firstSetoptFailure: (option: CURLoption, code: CURLcode)?

    package init?() {
        guard CurlRuntime.ensureInitialized(), let handle = curl_easy_init() else { return nil }
        self.handle = handle
    }

    deinit {
        curl_easy_cleanup(handle)
    }

    /// Back to curl's defaults; live connections and caches stay.
    package func reset() {
        curl_easy_reset(handle)
        firstSetoptFailure = nil
    }

    package func set(_ option: CURLoption, _ value: Int) {
        record(option, swoop_easy_setopt_long(handle, option, value))
    }

    package func set(_ option: CURLoption, _ value: Bool) {
        set(option, value ? 1 : 0)
    }

    package func set(_ option: CURLoption, offset value: Int64) {
        record(option, swoop_easy_setopt_off_t(handle, option, curl_off_t(value)))
    }

    /// Strings are copied by curl.
    package func set(_ option: CURLoption, _ value: String) {
        let code = value.withCString {
            swoop_easy_setopt_pointer(handle, option, UnsafeMutableRawPointer(mutating: $0))
        }
        record(option, code)
    }

    /// The pointee must outlive the transfer.
    package func set(_ option: CURLoption, pointer value: UnsafeMutableRawPointer?) {
        record(option, swoop_easy_setopt_pointer(handle, option, value))
    }

    package func set(_ option: CURLoption, callback: curl_write_callback) {
        record(option, swoop_easy_setopt_write_callback(handle, option, callback))
    }

    /// Makes this handle open its sockets close-on-exec, so a child process the application
    /// starts does not inherit the download's connections.
    package func openSocketsCloseOnExec() {
        record(CURLOPT_OPENSOCKETFUNCTION, swoop_easy_open_sockets_close_on_exec(handle))
    }

    /// Lifts a pause (`CURL_WRITEFUNC_PAUSE` from the write callback). libcurl delivers the paused
    /// write from inside this call, so the write callback runs before it returns.
    package func unpause() -> CURLcode {
        curl_easy_pause(handle, CURLPAUSE_CONT)
    }

    package func getLong(_ info: CURLINFO) -> Int? {
        var value = 0
        return swoop_easy_getinfo_long(handle, info, &value) == CURLE_OK ? value : nil
    }

    /// A `*_TIME_T` timing, in microseconds since the transfer started.
    package func getMicroseconds(_ info: CURLINFO) -> Int64? {
        var value: curl_off_t = 0
        return swoop_easy_getinfo_off_t(handle, info, &value) == CURLE_OK ? Int64(value) : nil
    }

    private func record(_ option: CURLoption, _ code: CURLcode) {
        if code != CURLE_OK && firstSetoptFailure == nil {
            firstSetoptFailure = (option, code)
        }
    }
}

/// A `curl_slist` of request header lines, freed with its owner.
///
/// Immutable once made, and libcurl only reads it: one list may serve every request that sends the
/// same lines (``usual``).
package final class CurlHeaderList: @unchecked Sendable {
    package let list: UnsafeMutablePointer<curl_slist>?

    /// ``RequestHeaders/usualLines``, for every request that sends them.
    package static let usual = CurlHeaderList(RequestHeaders.usualLines)

    package init(_ lines: [String]) {
        var list: UnsafeMutablePointer<curl_slist>?
        for line in lines {
            list = line.withCString { curl_slist_append(list, $0) }  // no copy of the line first
        }
        self.list = list
    }

    deinit {
        curl_slist_free_all(list)
    }
}

extension CURLcode {
    /// curl's one-line description of the code.
    package var message: String { String(cString: curl_easy_strerror(self)) }
}
