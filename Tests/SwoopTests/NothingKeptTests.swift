import Testing

@testable import Swoop

/// A failure that keeps nothing says why, for the kind of download it was.
@Suite("Nothing kept")
struct NothingKeptTests {
    @Test("a stream's failure says a stream keeps nothing, not that a file arrived in one response")
    func stream() {
        let error = DownloadError(.network, "the server went away", remedy: .resume)
        let kept = error.nothingKept(store: .none(resumedMap: false), streaming: true)
        #expect(kept.reason == "the server went away (a stream keeps nothing to resume from)")
        #expect(kept.remedy == .startAgain)
        #expect(
            error.nothingKept(store: .none(resumedMap: false)).reason == "the server went away",
            "no store, no stream: no why")
    }

    @Test("what the error carries stays: the proxy, the status, the curl code")
    func keepsCauses() {
        var error = DownloadError(.httpStatus, "503", remedy: .resume, httpStatus: 503, curlCode: 22)
        error.proxy = "http://127.0.0.1:3128"
        let kept = error.nothingKept(store: .none(resumedMap: false), streaming: true)
        #expect(kept.proxy == "http://127.0.0.1:3128" && kept.httpStatus == 503 && kept.curlCode == 22)
    }
}
