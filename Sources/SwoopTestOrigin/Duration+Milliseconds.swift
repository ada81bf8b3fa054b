extension Duration {
    /// The whole milliseconds in it (what the origin's delays and signed URLs' times count in).
    var wholeMilliseconds: Int64 {
        components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
    }
}
