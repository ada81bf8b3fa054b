import SwoopTestSupport
import Testing
@testable import Swoop
@testable import SwoopStore

@Suite("Content-Disposition parsing")
struct ContentDispositionTests {
    /// The safe name a header value yields, as `-J` would use it.
    private func name(_ value: String) -> String? {
        ContentDisposition(value)?.safeFileName
    }

    @Test(
        "filename as a token or a quoted string",
        arguments: [
            ("attachment; filename=report.pdf", "report.pdf"),
            ("attachment; filename=\"report.pdf\"", "report.pdf"),
            ("inline; filename=\"report.pdf\"", "report.pdf"),
            ("ATTACHMENT; FILENAME=report.pdf", "report.pdf"),
            ("attachment; FileName=\"report.pdf\"", "report.pdf"),
            ("attachment;filename=report.pdf", "report.pdf"),
            ("  attachment ;  filename = \"report.pdf\"  ", "report.pdf"),
            ("attachment; filename=\"a \\\"b\\\".txt\"", "a \"b\".txt"),
            ("attachment; filename=\"a;b.txt\"", "a;b.txt"),
            ("attachment; filename=\"a;b.txt\"; size=3", "a;b.txt"),
            ("attachment; filename=\"\\a\\b\\c.txt\"", "abc.txt"),
            ("attachment; creation-date=\"Wed, 12 Feb 1997 16:29:51 -0500\"; filename=x.bin", "x.bin"),
            ("attachment; foo=\"bar;baz\"; filename=x.bin", "x.bin"),
            ("attachment; filename=My Report.pdf", "My Report.pdf"),
            ("attachment; filename=\"naïve.txt\"", "naïve.txt"),
            ("attachment; filename=\"na%C3%AFve.txt\"", "na%C3%AFve.txt"),
            ("attachment; filename=x.bin;", "x.bin"),
            ("attachment;; filename=x.bin", "x.bin"),
            ("filename=x.bin", "x.bin"),
            ("filename*=UTF-8''x.bin", "x.bin"),
            ("form-data; name=\"f\"; filename=\"x.bin\"", "x.bin"),
            ("attachment; filename=\"x.bin\"; filename=\"x.bin\"", "x.bin"),
        ] as [(String, String)])
    func plainNames(value: String, expected: String) {
        #expect(name(value) == expected, "\(value)")
    }

    @Test(
        "filename* (RFC 8187) wins over filename",
        arguments: [
            ("attachment; filename*=UTF-8''na%C3%AFve%20file.txt", "naïve file.txt"),
            ("attachment; filename=\"fallback.txt\"; filename*=UTF-8''na%C3%AFve.txt", "naïve.txt"),
            ("attachment; filename*=UTF-8''na%C3%AFve.txt; filename=\"fallback.txt\"", "naïve.txt"),
            ("attachment; filename*=utf-8''na%c3%afve.txt", "naïve.txt"),
            ("attachment; FILENAME*=UTF-8'en'%E2%82%AC%20rates.txt", "€ rates.txt"),
            ("attachment; filename*=ISO-8859-1''caf%E9.txt", "café.txt"),
            ("attachment; filename*=iso-8859-1'de'%DCbersicht.txt", "Übersicht.txt"),
            ("attachment; filename*=UTF-8''%E6%BC%A2%E5%AD%97.txt", "漢字.txt"),
            // An unusable filename* leaves filename to decide.
            ("attachment; filename*=UTF-8''bad%ZZ.txt; filename=ok.txt", "ok.txt"),
            ("attachment; filename*=UTF-8''bad%C3.txt; filename=ok.txt", "ok.txt"),
            ("attachment; filename*=UTF-8''bad%C3; filename=ok.txt", "ok.txt"),
            ("attachment; filename*=UTF-8''bad%; filename=ok.txt", "ok.txt"),
            ("attachment; filename*=KOI8-R''%F0%D2%C9%D7%C5%D4.txt; filename=ok.txt", "ok.txt"),
            ("attachment; filename*=\"UTF-8''quoted.txt\"; filename=ok.txt", "ok.txt"),
            ("attachment; filename*=UTF-8''raw space.txt; filename=ok.txt", "ok.txt"),
            ("attachment; filename*=UTF-8''raw-ï.txt; filename=ok.txt", "ok.txt"),
            ("attachment; filename*=no-quotes.txt; filename=ok.txt", "ok.txt"),
            ("attachment; filename*=UTF-8'only-one-quote.txt; filename=ok.txt", "ok.txt"),
            ("attachment; filename*=UTF-8''; filename=ok.txt", "ok.txt"),
            ("attachment; filename*=UTF-8''a.txt; filename*=UTF-8''b.txt; filename=ok.txt", "ok.txt"),
        ] as [(String, String)])
    func extendedNames(value: String, expected: String) {
        #expect(name(value) == expected, "\(value)")
    }

    @Test(
        "names that climb out keep only their last component",
        arguments: [
            ("attachment; filename=\"../../etc/passwd\"", "passwd"),
            ("attachment; filename=../../etc/passwd", "passwd"),
            ("attachment; filename=\"/abs/x\"", "x"),
            ("attachment; filename=\"/etc/cron.d/job\"", "job"),
            ("attachment; filename=\"..\\\\..\\\\windows\\\\system32\\\\evil.dll\"", "evil.dll"),
            ("attachment; filename=C:\\Users\\me\\file.txt", "file.txt"),
            ("attachment; filename=\"dir/sub\\\\mixed.txt\"", "mixed.txt"),
            ("attachment; filename*=UTF-8''..%2F..%2Fx", "x"),
            ("attachment; filename*=UTF-8''%2Fetc%2Fpasswd", "passwd"),
            ("attachment; filename*=UTF-8''..%5C..%5Cx.txt", "x.txt"),
            // Not decoded in filename=, so the escapes stay literal: one harmless component.
            ("attachment; filename=\"..%2F..%2Fx\"", "..%2F..%2Fx"),
            ("attachment; filename=\"...\"", "..."),
            ("attachment; filename=\".hidden\"", ".hidden"),
        ] as [(String, String)])
    func traversal(value: String, expected: String) {
        #expect(name(value) == expected, "\(value)")
    }

    @Test("control characters and NUL are replaced, as in URL names")
    func controlCharacters() {
        #expect(name("attachment; filename=\"evil.txt\u{0}.pdf\"") == "evil.txt_.pdf")
        #expect(name("attachment; filename*=UTF-8''evil.txt%00.pdf") == "evil.txt_.pdf")
        #expect(name("attachment; filename*=UTF-8''%00") == "_")
        #expect(name("attachment; filename*=UTF-8''a%0Ab%0Dc%1B%7F.txt") == "a_b_c__.txt")
        #expect(name("attachment; filename*=UTF-8''%C2%85nel.txt") == "_nel.txt")
        #expect(name("attachment; filename*=ISO-8859-1''%85nel.txt") == "_nel.txt")
        #expect(name("attachment; filename=\"tab\there.txt\"") == "tab_here.txt")
    }

    @Test(
        "nothing usable gives no name, so the URL decides",
        arguments: [
            "",
            "   ",
            "attachment",
            "inline",
            "attachment; size=3",
            "attachment; filename=",
            "attachment; filename=\"\"",
            "attachment; filename=\"   \"",
            "attachment; filename=..",
            "attachment; filename=\"..\"",
            "attachment; filename=.",
            "attachment; filename=\"a/..\"",
            "attachment; filename=\"../..\"",
            "attachment; filename=\"dir/\"",
            "attachment; filename=\"/\"",
            "attachment; filename*=UTF-8''..",
            "attachment; filename*=UTF-8''%2E%2E",
            "attachment; filename*=UTF-8''x%2F..",
            // Malformed: an unterminated quote, text after the quote, a stray quote, a missing `=`.
            "attachment; filename=\"unterminated.txt",
            "attachment; filename=\"a.txt\"junk",
            "attachment; filename=a\"b\".txt",
            "attachment; filename",
            "attachment; =x.txt",
            "attachment x; filename=x.txt",
            "\"attachment\"; filename=x.txt",
            "; filename=x.txt",
            // The same parameter twice with different values: no side is picked.
            "attachment; filename=a.txt; filename=b.txt",
            "attachment; filename=a.txt; filename=\"unterminated",
            // Bytes that were not UTF-8 (raw ISO-8859-1) arrive as U+FFFD.
            "attachment; filename=\"caf\u{FFFD}.txt\"",
        ])
    func noName(value: String) {
        #expect(name(value) == nil, "\(value.debugDescription)")
    }

    @Test func typeAndRawName() {
        let parsed = ContentDisposition("Attachment; filename=\"../x.txt\"")
        #expect(parsed?.type == "attachment")
        #expect(parsed?.fileName == "../x.txt")
        #expect(parsed?.safeFileName == "x.txt")
        #expect(ContentDisposition("filename=x")?.type == "")
        #expect(ContentDisposition("inline")?.fileName == nil)
        #expect(ContentDisposition("") == nil)
        #expect(ContentDisposition("attachment foo") == nil)
    }

    @Test func longNamesAreCutLikeURLNames() {
        let long = String(repeating: "a", count: 400) + ".tar.gz"
        let safe = name("attachment; filename=\"\(long)\"")
        #expect(safe == FileName.sanitized(long))
        #expect(safe.map { $0.utf8.count <= 255 && $0.hasSuffix(".gz") } == true)
    }

    @Test("random header values give one safe component or nothing", arguments: 0..<2)
    func randomValues(batch: Int) {
        var random = SplitMix64(seed: 0xCD15_0000 &+ UInt64(batch))
        let pieces: [String] = [
            "attachment", "inline", ";", " ", "filename", "filename*", "=", "\"", "\\", "/", "..", ".", "'",
            "UTF-8", "ISO-8859-1", "%", "%2F", "%2E", "%00", "%C3%AF", "%ZZ", "a", "é", "\u{0}", "\n", "\u{FFFD}",
            "x.txt",
        ]
        for _ in 0..<3000 {
            let count = Int(random.next() % 16)
            let value = (0..<count).map { _ in pieces.randomElement(using: &random)! }.joined()
            guard let safe = name(value) else { continue }
            #expect(!safe.isEmpty && safe != "." && safe != "..", "\(value.debugDescription)")
            #expect(
                !safe.contains("/") && !safe.contains("\\"), "\(safe.debugDescription) from \(value.debugDescription)")
            #expect(!safe.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }, "\(safe.debugDescription)")
        }
    }
}
