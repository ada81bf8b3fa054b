import SwoopCore

/// What the AWS settings are read from: the environment and the files it points to. The library
/// reads the process's (``Swoop``'s `S3SettingsSources.process`); tests give their own.
package struct S3SettingsSources: Sendable {
    package var environment: [String: String]
    /// The text of the file at a path, or `nil` when it cannot be read.
    package var readFile: @Sendable (String) -> String?

    package init(environment: [String: String], readFile: @escaping @Sendable (String) -> String?) {
        self.environment = environment
        self.readFile = readFile
    }

    /// A variable's value; an empty one counts as unset.
    func variable(_ name: String) -> String? {
        environment[name].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// `AWS_SHARED_CREDENTIALS_FILE`, else `~/.aws/credentials`.
    var credentialsPath: String { path(variable: "AWS_SHARED_CREDENTIALS_FILE", default: "credentials") }
    /// `AWS_CONFIG_FILE`, else `~/.aws/config`.
    var configPath: String { path(variable: "AWS_CONFIG_FILE", default: "config") }

    private func path(variable name: String, default file: String) -> String {
        let home = variable("HOME") ?? ""
        guard let given = variable(name) else { return "\(home)/.aws/\(file)" }
        return given.hasPrefix("~/") ? home + given.dropFirst() : given
    }

    func file(_ path: String) -> SharedConfigFile? {
        readFile(path).map(SharedConfigFile.init(text:))
    }
}

/// Region and endpoint for `s3://` requests, read as the AWS command-line tools read them.
package struct S3Settings: Sendable, Equatable {
    package var region: String
    package var endpoint: S3Endpoint

    /// Each setting given here wins; the rest come from the environment, then the profile
    /// (`profile`, else `AWS_PROFILE`, else `default`) in the config file, then the defaults.
    ///
    /// Region: `AWS_REGION`, `AWS_DEFAULT_REGION`, the profile's `region`, `us-east-1`. Endpoint:
    /// `AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`, the profile's `s3 = endpoint_url` or
    /// `endpoint_url` (none of these with `AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true`), else AWS S3
    /// in the region.
    package static func resolve(
        profile: String?, region: String?, endpointURL: String?, from sources: S3SettingsSources
    ) throws(DownloadError) -> S3Settings {
        let name = profile ?? sources.variable("AWS_PROFILE") ?? "default"
        let config = sources.file(sources.configPath)
        let section = name == "default" ? "default" : "profile \(name)"
        let fromProfile = { (setting: String) in config?.value(setting, in: section).flatMap { $0.isEmpty ? nil : $0 } }
        let region =
            region ?? sources.variable("AWS_REGION") ?? sources.variable("AWS_DEFAULT_REGION")
            ?? fromProfile("region") ?? "us-east-1"
        let ignoresConfigured = sources.variable("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")?.lowercased() == "true"
        let configured: (url: String, origin: String)? =
            if ignoresConfigured {
                nil
            } else if let url = sources.variable("AWS_ENDPOINT_URL_S3") {
                (url, "AWS_ENDPOINT_URL_S3")
            } else if let url = sources.variable("AWS_ENDPOINT_URL") {
                (url, "AWS_ENDPOINT_URL")
            } else if let url = fromProfile("s3.endpoint_url") ?? fromProfile("endpoint_url") {
                (url, "the endpoint_url of profile '\(name)' in \(sources.configPath)")
            } else {
                nil
            }
        let endpoint: S3Endpoint =
            if let endpointURL {
                try S3Endpoint(parsing: endpointURL, origin: "the configuration")
            } else if let configured {
                try S3Endpoint(parsing: configured.url, origin: configured.origin)
            } else {
                .aws(region: region)
            }
        return S3Settings(region: region, endpoint: endpoint)
    }

    /// The credentials to sign with: those of `profile` when it is named (as `aws --profile`
    /// does, over any in the environment); else `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and
    /// `AWS_SESSION_TOKEN`; else those of `AWS_PROFILE` or `default` in the credentials file, then
    /// the config file.
    package static func credentials(
        profile: String?, from sources: S3SettingsSources
    ) throws(DownloadError) -> S3Credentials {
        if profile == nil, let key = sources.variable("AWS_ACCESS_KEY_ID") {
            guard let secret = sources.variable("AWS_SECRET_ACCESS_KEY") else {
                throw DownloadError(
                    .invalidRequest, "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not",
                    remedy: .checkS3Credentials)
            }
            let token = sources.variable("AWS_SESSION_TOKEN") ?? sources.variable("AWS_SECURITY_TOKEN")
            return S3Credentials(accessKeyID: key, secretAccessKey: secret, sessionToken: token)
        }
        let name = profile ?? sources.variable("AWS_PROFILE") ?? "default"
        let credentialsFile = sources.file(sources.credentialsPath)
        let configFile = sources.file(sources.configPath)
        let places: [(file: SharedConfigFile?, section: String)] = [
            (credentialsFile, name), (configFile, name == "default" ? "default" : "profile \(name)"),
        ]
        for (file, section) in places {
            guard let file, file.sections[section] != nil else { continue }
            guard let key = file.value("aws_access_key_id", in: section), !key.isEmpty,
                let secret = file.value("aws_secret_access_key", in: section), !secret.isEmpty
            else { continue }
            let token = file.value("aws_session_token", in: section).flatMap { $0.isEmpty ? nil : $0 }
            return S3Credentials(accessKeyID: key, secretAccessKey: secret, sessionToken: token)
        }
        let named = profile != nil || sources.variable("AWS_PROFILE") != nil
        let exists = places.contains { $0.file?.sections[$0.section] != nil }
        let files = "\(sources.credentialsPath) or \(sources.configPath)"
        let reason =
            if named && !exists {
                "the AWS profile '\(name)' is not in \(files)"
            } else if exists {
                "the AWS profile '\(name)' has no aws_access_key_id and aws_secret_access_key (in \(files))"
            } else {
                "no AWS credentials were found: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set, and "
                    + "there is no profile '\(name)' in \(files)"
            }
        throw DownloadError(.invalidRequest, reason, remedy: .checkS3Credentials)
    }
}
