#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Swoop

/// The `swoop bench --chart` picture: throughput against connections, and over time.
enum BenchChart {
    static func svg(_ results: [ThroughputMeasurement], url: String, recommended: Int?) -> String {
        let width = 900.0, panel = 260.0, left = 80.0, right = 30.0, top = 50.0, gap = 70.0
        let plotWidth = width - left - right
        let mib = 1_048_576.0
        let peak =
            max(1, (results.flatMap { $0.timeline.map(\.bytesPerSecond) } + results.map(\.bytesPerSecond)).max() ?? 1)
            / mib
        let scale = niceCeiling(peak)
        let colors = [
            "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
            "#7f7f7f",
        ]
        var out = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" \
            height="\(Int(top + 2 * panel + gap + 60))" font-family="sans-serif" font-size="12">
            <rect width="100%" height="100%" fill="white"/>
            <text x="\(left)" y="24" font-size="16" font-weight="bold">swoop bench \(escape(url))</text>

            """
        // Panel 1: steady throughput against connections (log2 x axis).
        let counts = results.map(\.connections)
        let maxLog = log2(Double(max(2, counts.max() ?? 2)))
        func x1(_ count: Int) -> Double { left + (maxLog > 0 ? log2(Double(count)) / maxLog : 0) * plotWidth }
        func y(_ value: Double, base: Double) -> Double { base + panel - value / scale * panel }
        out += axes(
            left: left, top: top, width: plotWidth, height: panel, yMax: scale,
            title: "throughput (MiB/s) vs connections")
        var points = ""
        for result in results {
            let px = x1(result.connections), py = y(result.bytesPerSecond / mib, base: top)
            points += "\(fmt(px)),\(fmt(py)) "
            let marker = result.connections == recommended ? "#d62728" : "#1f77b4"
            out += "<circle cx=\"\(fmt(px))\" cy=\"\(fmt(py))\" r=\"4\" fill=\"\(marker)\"/>\n"
            out +=
                "<text x=\"\(fmt(px))\" y=\"\(fmt(top + panel + 16))\" "
                + "text-anchor=\"middle\">\(result.connections)</text>\n"
            out +=
                "<text x=\"\(fmt(px))\" y=\"\(fmt(py - 8))\" text-anchor=\"middle\" "
                + "font-size=\"10\">\(Format.fixed(result.bytesPerSecond / mib, digits: 1))</text>\n"
        }
        out += "<polyline points=\"\(points)\" fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\"/>\n"
        if let recommended {
            out +=
                "<text x=\"\(fmt(left + plotWidth))\" y=\"\(fmt(top - 8))\" text-anchor=\"end\" "
                + "fill=\"#d62728\">recommended: \(recommended)</text>\n"
        }
        // Panel 2: throughput over time, one line per count.
        let top2 = top + panel + gap
        let longest = max(0.1, results.flatMap { $0.timeline.map(\.seconds) }.max() ?? 0.1)
        out += axes(
            left: left, top: top2, width: plotWidth, height: panel, yMax: scale,
            title: "throughput (MiB/s) over time (s)")
        out +=
            "<text x=\"\(fmt(left + plotWidth))\" y=\"\(fmt(top2 + panel + 16))\" "
            + "text-anchor=\"end\">\(Format.fixed(longest, digits: 1)) s</text>\n"
        for (index, result) in results.enumerated() {
            let color = colors[index % colors.count]
            let line = result.timeline.map {
                "\(fmt(left + $0.seconds / longest * plotWidth)),\(fmt(y($0.bytesPerSecond / mib, base: top2)))"
            }
            out +=
                "<polyline points=\"\(line.joined(separator: " "))\" fill=\"none\" stroke=\"\(color)\" "
                + "stroke-width=\"1.5\"/>\n"
            out +=
                "<text x=\"\(fmt(left + 10 + Double(index) * 80))\" y=\"\(fmt(top2 + panel + 40))\" "
                + "fill=\"\(color)\">\(result.connections) conn</text>\n"
        }
        return out + "</svg>\n"
    }

    private static func axes(
        left: Double, top: Double, width: Double, height: Double, yMax: Double, title: String
    ) -> String {
        var out = "<text x=\"\(fmt(left))\" y=\"\(fmt(top - 8))\" font-weight=\"bold\">\(title)</text>\n"
        out +=
            "<line x1=\"\(fmt(left))\" y1=\"\(fmt(top + height))\" x2=\"\(fmt(left + width))\" "
            + "y2=\"\(fmt(top + height))\" stroke=\"black\"/>\n"
        out +=
            "<line x1=\"\(fmt(left))\" y1=\"\(fmt(top))\" x2=\"\(fmt(left))\" y2=\"\(fmt(top + height))\" "
            + "stroke=\"black\"/>\n"
        for step in 0...4 {
            let value = yMax * Double(step) / 4
            let yy = top + height - height * Double(step) / 4
            out +=
                "<line x1=\"\(fmt(left))\" y1=\"\(fmt(yy))\" x2=\"\(fmt(left + width))\" y2=\"\(fmt(yy))\" "
                + "stroke=\"#e5e5e5\"/>\n"
            out +=
                "<text x=\"\(fmt(left - 6))\" y=\"\(fmt(yy + 4))\" "
                + "text-anchor=\"end\">\(Format.fixed(value, digits: value < 10 ? 1 : 0))</text>\n"
        }
        return out
    }

    private static func niceCeiling(_ value: Double) -> Double {
        let magnitude = pow(10, floor(log10(max(value, 0.001))))
        for step in [1.0, 2.0, 2.5, 5.0, 10.0] where step * magnitude >= value { return step * magnitude }
        return 10 * magnitude
    }

    private static func fmt(_ value: Double) -> String { Format.fixed(value, digits: 1) }

    private static func escape(_ text: String) -> String {
        text.replacing("&", with: "&amp;").replacing("<", with: "&lt;").replacing(">", with: "&gt;")
    }
}
