import Swoop

extension DownloadError {
    /// The message with its fix in the command line's terms (its flags), not the library's.
    var commandLineMessage: String {
        guard let remedy else { return message }
        return "\(reason); \(remedy.commandLineText)"
    }
}

extension DownloadError.Remedy {
    /// What the user of `swoop` does about it.
    var commandLineText: String {
        switch self {
        case .replaceTarget: "use --force to replace it or -o to choose another name"
        case .nameAFile: "name a file with -o"
        case .chooseWritableLocation: "choose a writable location with -o or -d"
        case .freeSpaceAndResume: "free some space and run the same command again to resume"
        case .freeSpace:
            "free some space and run the same command again (nothing was kept: it starts from the beginning)"
        case .resume: "the partial download is kept; resume with the same command"
        case .startAgain: "nothing was kept; run the same command again (it starts from the beginning)"
        case .checkCertificate:
            "check the certificate; for a server with a private CA, pass its certificate with --cacert FILE "
                + "(or --capath DIR); or pass --insecure to skip verification (unsafe)"
        case .sendCredentials: "pass them with --header 'Authorization: ...'"
        case .waitForOtherDownload: "wait for it to finish, or stop it and run this command again (it resumes)"
        case .createDirectory: "create the directory first"
        case .correctExpectedSize:
            "correct or remove size= in the list (the file may have changed on the server since the list was made)"
        case .checkURLProvider:
            "check --url-command (it must print a fresh URL of the same object); the partial download is kept and the "
                + "same command resumes it"
        case .checkProxy:
            "check --proxy (address and credentials), or the http_proxy, https_proxy, all_proxy and no_proxy "
                + "environment variables"
        case .checkS3Credentials:
            "check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, or the profile (--profile, "
                + "AWS_PROFILE) in ~/.aws/credentials; for a public bucket pass --no-sign-request"
        case .checkS3Endpoint:
            "check the bucket's name, the endpoint (--endpoint-url, AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL) and the "
                + "region (--region, AWS_REGION)"
        case .checkLocalInterface:
            "check --interface: name one of this machine's interfaces or its addresses (ip -brief address lists them)"
        case .restartShares:
            "run every share again with --force to discard the shares fetched so far and start over on the server's "
                + "version"
        default: description
        }
    }
}
