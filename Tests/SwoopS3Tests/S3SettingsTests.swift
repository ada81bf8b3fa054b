import SwoopCore
import SwoopS3
import Testing

@Suite("AWS settings and credentials, as the AWS tools read them")
struct S3SettingsTests {
    static func sources(_ environment: [String: String], files: [String: String] = [:]) -> S3SettingsSources {
        var environment = environment
        environment["HOME"] = environment["HOME"] ?? "/home/u"
        return S3SettingsSources(environment: environment) { files[$0] }
    }

    static let credentialsFile = """
        [default]
        aws_access_key_id = DEFAULTKEY
        aws_secret_access_key = default-secret

        ; a comment
        [dev]
        aws_access_key_id=DEVKEY
        aws_secret_access_key =  dev-secret   
        aws_session_token = dev-token
        """
    static let configFile = """
        [default]
        region = eu-central-1

        [profile dev]
        region = ap-south-1
        s3 =
          endpoint_url = http://127.0.0.1:9000
        [profile config-only]
        aws_access_key_id = CONFIGKEY
        aws_secret_access_key = config-secret
        endpoint_url = https://store.example
        """
    static let files = ["/home/u/.aws/credentials": credentialsFile, "/home/u/.aws/config": configFile]

    @Test("credentials: a named profile, then the environment, then AWS_PROFILE or default in the files")
    func credentialsChain() throws {
        let environment = [
            "AWS_ACCESS_KEY_ID": "ENVKEY", "AWS_SECRET_ACCESS_KEY": "env-secret", "AWS_SESSION_TOKEN": "t",
        ]
        let fromEnvironment = try S3Settings.credentials(
            profile: nil, from: Self.sources(environment, files: Self.files))
        #expect(
            fromEnvironment == S3Credentials(accessKeyID: "ENVKEY", secretAccessKey: "env-secret", sessionToken: "t"))
        let named = try S3Settings.credentials(profile: "dev", from: Self.sources(environment, files: Self.files))
        #expect(named == S3Credentials(accessKeyID: "DEVKEY", secretAccessKey: "dev-secret", sessionToken: "dev-token"))
        let byDefault = try S3Settings.credentials(profile: nil, from: Self.sources([:], files: Self.files))
        #expect(byDefault.accessKeyID == "DEFAULTKEY")
        let byVariable = try S3Settings.credentials(
            profile: nil, from: Self.sources(["AWS_PROFILE": "config-only"], files: Self.files))
        #expect(byVariable.accessKeyID == "CONFIGKEY" && byVariable.sessionToken == nil)
        let moved = try S3Settings.credentials(
            profile: nil,
            from: Self.sources(
                ["AWS_SHARED_CREDENTIALS_FILE": "~/elsewhere"], files: ["/home/u/elsewhere": Self.credentialsFile]))
        #expect(moved.accessKeyID == "DEFAULTKEY")
    }

    @Test("no credentials, a missing profile, half a key: errors that say where they looked")
    func credentialErrors() {
        #expect {
            try S3Settings.credentials(profile: nil, from: Self.sources([:]))
        } throws: { error in
            let error = error as! DownloadError
            return error.reason.contains("no AWS credentials") && error.reason.contains("/home/u/.aws/credentials")
                && error.remedy == .checkS3Credentials
        }
        #expect {
            try S3Settings.credentials(profile: "nope", from: Self.sources([:], files: Self.files))
        } throws: { error in
            (error as! DownloadError).reason.contains("profile 'nope' is not in")
        }
        #expect {
            try S3Settings.credentials(profile: nil, from: Self.sources(["AWS_ACCESS_KEY_ID": "K"]))
        } throws: { error in
            (error as! DownloadError).reason.contains("AWS_SECRET_ACCESS_KEY is not")
        }
    }

    @Test("region and endpoint: given, then the environment, then the profile, then AWS in us-east-1")
    func settingsPrecedence() throws {
        let none = try S3Settings.resolve(profile: nil, region: nil, endpointURL: nil, from: Self.sources([:]))
        #expect(none.region == "us-east-1" && none.endpoint == .aws(region: "us-east-1"))
        let byDefault = try S3Settings.resolve(
            profile: nil, region: nil, endpointURL: nil, from: Self.sources([:], files: Self.files))
        #expect(byDefault.region == "eu-central-1" && byDefault.endpoint == .aws(region: "eu-central-1"))
        let dev = try S3Settings.resolve(
            profile: "dev", region: nil, endpointURL: nil, from: Self.sources([:], files: Self.files))
        #expect(dev.region == "ap-south-1" && dev.endpoint.description == "http://127.0.0.1:9000")
        let environment = [
            "AWS_PROFILE": "dev", "AWS_DEFAULT_REGION": "us-west-1", "AWS_ENDPOINT_URL": "http://a:1",
            "AWS_ENDPOINT_URL_S3": "http://b:2",
        ]
        let fromEnvironment = try S3Settings.resolve(
            profile: nil, region: nil, endpointURL: nil, from: Self.sources(environment, files: Self.files))
        #expect(fromEnvironment.region == "us-west-1" && fromEnvironment.endpoint.description == "http://b:2")
        let given = try S3Settings.resolve(
            profile: nil, region: "sa-east-1", endpointURL: "https://c",
            from: Self.sources(environment, files: Self.files))
        #expect(given.region == "sa-east-1" && given.endpoint.description == "https://c")
        var ignoring = environment
        ignoring["AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"] = "true"
        let ignored = try S3Settings.resolve(
            profile: nil, region: nil, endpointURL: nil, from: Self.sources(ignoring, files: Self.files))
        #expect(ignored.endpoint == .aws(region: "us-west-1"))
        #expect(throws: DownloadError.self) {
            try S3Settings.resolve(
                profile: nil, region: nil, endpointURL: nil, from: Self.sources(["AWS_ENDPOINT_URL": "localhost:9000"]))
        }
    }
}
