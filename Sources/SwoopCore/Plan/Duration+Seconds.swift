extension Duration {
    /// The duration in milliseconds, as a floating-point number.
    package var milliseconds: Double {
        Double(components.seconds) * 1000 + Double(components.attoseconds) / 1e15
    }

    /// The duration in seconds, as a floating-point number.
    package var seconds: Double { milliseconds / 1000 }
}
