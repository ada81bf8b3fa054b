import Testing
@testable import SwoopCore

/// Names are bytes; server text is escaped before it is printed; ETags compare in one normal form.
@Suite("Names, escaping and ETag forms")
struct NameTests {
    @Test("canonically equivalent names are different ByteNames, and hash apart")
    func byteNames() {
        let forms = ["\u{C5}ngstrom", "\u{212B}ngstrom", "A\u{30A}ngstrom", "caf\u{E9}", "cafe\u{301}"]
        #expect("\u{C5}ngstrom" == "A\u{30A}ngstrom", "String equality is canonical equivalence")
        #expect(Set(forms).count == 2, "a Set<String> merges them into two")
        #expect(Set(forms.map(ByteName.init)).count == 5)
        #expect(!"caf\u{E9}".hasSameBytes(as: "cafe\u{301}") && "ab".hasSameBytes(as: "ab"))
        #expect(!"cafe\u{301}/x".hasBytePrefix("caf\u{E9}") && "cafe\u{301}/x".hasBytePrefix("cafe"))
    }

    @Test("control characters are escaped as ls -b shows them; other text is unchanged")
    func escaping() {
        #expect("\u{1B}]0;title\u{07}".escapingControlCharacters() == "\\x1b]0;title\\x07")
        #expect("\u{1B}[2J\r\n\t\u{7F}".escapingControlCharacters() == "\\x1b[2J\\x0d\\x0a\\x09\\x7f")
        #expect("c1 \u{9B}31m".escapingControlCharacters() == "c1 \\u{9b}31m")
        #expect("line\nnext\u{1B}".escapingControlCharacters(keeping: ["\n"]) == "line\nnext\\x1b")
        let plain = "caf\u{E9} \u{212B} back\\slash \u{A0}"
        #expect(!plain.containsControlCharacters && plain.escapingControlCharacters().hasSameBytes(as: plain))
        #expect(DownloadError(.invalidResponse, "key \u{1B}[2J").reason == "key \\x1b[2J")
    }

    @Test("ETags: quotes, surrounding spaces and the case of hex do not matter; W/ and other text do")
    func etagForms() {
        #expect(ETagForm.same("\"9B2CF535F27731C974343645A3985328\"", "9b2cf535f27731c974343645a3985328"))
        #expect(ETagForm.same(" \"d41d8cd98f00b204e9800998ecf8427e-3\" ", "D41D8CD98F00B204E9800998ECF8427E-3"))
        #expect(!ETagForm.same("W/\"abc\"", "\"abc\""))
        #expect(!ETagForm.same("\"Version-A\"", "\"version-a\""), "only hex is case-folded")
        #expect(!ETagForm.same(nil, "\"a\"") && !ETagForm.same("\"a\"", "\"b\""))
        let identity = ObjectIdentity(size: 10, etag: "\"ABC123\"")
        #expect(identity.compare(ObjectIdentity(size: 10, etag: "abc123"), observedIn: .representation) == .same)
    }
}
