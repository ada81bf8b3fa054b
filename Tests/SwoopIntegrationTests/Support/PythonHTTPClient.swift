import Foundation

/// Requests made by Python's `http.client`, in order, all in one process: a test sees the status,
/// headers and body a server sent, with no client logic of ours in between (each request on a
/// connection of its own).
enum PythonHTTPClient {
    struct Request: Encodable, Sendable {
        var url: String
        var method = "GET"
        var headers: [String: String] = [:]
    }

    struct Response: Decodable, Sendable {
        var status: Int
        /// Header names lowercased; the last value of a repeated header.
        var headers: [String: String]
        var body: Data

        func header(_ name: String) -> String? { headers[name.lowercased()] }
    }

    private static let script = """
        import base64, http.client, json, sys, urllib.parse
        answers = []
        for request in json.loads(sys.argv[1]):
            url = urllib.parse.urlsplit(request["url"])
            connection = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
            target = url.path + ("?" + url.query if url.query else "")
            connection.request(request["method"], target, headers=request["headers"])
            response = connection.getresponse()
            body = response.read()
            answers.append({"status": response.status,
                            "headers": {name.lower(): value for name, value in response.getheaders()},
                            "body": base64.b64encode(body).decode()})
            connection.close()
        print(json.dumps(answers))
        """

    /// Sends `requests` one after the other and returns their responses.
    static func send(_ requests: [Request]) async throws -> [Response] {
        let json = String(decoding: try JSONEncoder().encode(requests), as: UTF8.self)
        let output = try await ServerPrograms.run(try ServerPrograms.python(), ["-c", script, json])
        return try JSONDecoder().decode([Response].self, from: Data(output.utf8))
    }
}
