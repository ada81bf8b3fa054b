import Testing

@testable import SwoopCore

@Suite("Wording")
struct WordingTests {
    @Test(
        "counts agree with their nouns",
        arguments: [
            (0, "0 bytes"), (1, "1 byte"), (2, "2 bytes"), (-1, "-1 bytes"), (1_048_576, "1048576 bytes"),
        ])
    func bytes(count: Int, text: String) {
        #expect(Wording.bytes(count) == text)
        #expect(Wording.bytes(Int64(count)) == text)
    }

    @Test("irregular plurals are given, regular ones add s")
    func plurals() {
        #expect(Wording.count(1, "retry", plural: "retries") == "1 retry")
        #expect(Wording.count(3, "retry", plural: "retries") == "3 retries")
        #expect(Wording.count(1, "file") == "1 file")
        #expect(Wording.count(0, "file") == "0 files")
        #expect(Wording.noun(for: 1, "entry", plural: "entries") == "entry")
    }

    @Test("lists: one item alone, two joined by the conjunction, more with commas before it")
    func lists() {
        #expect(Wording.list([], "or") == "")
        #expect(Wording.list(["http"], "or") == "http")
        #expect(Wording.list(["http", "https"], "and") == "http and https")
        #expect(Wording.list(["http://", "https://", "s3://"], "or") == "http://, https:// or s3://")
    }

    @Test("a server's text is made safe for a terminal: C0, DEL and C1 escaped, length capped")
    func serverText() {
        #expect(Wording.serverText("Bad\u{1B}[2J Gateway") == "Bad\\x1b[2J Gateway")
        #expect(Wording.serverText("a\u{7F}b\u{9B}c\td") == "a\\x7fb\\x9bc\\x09d")
        #expect(Wording.serverText("café ok") == "café ok")
        #expect(Wording.serverText(String(repeating: "x", count: 10), limit: 4) == "xxxx...")
    }
}
