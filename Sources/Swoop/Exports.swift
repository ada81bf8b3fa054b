// The core's public types (DownloadError, Checksum) are part of this library's API: `import Swoop`
// brings them, as `import NIO` brings NIOCore's.
@_exported import SwoopCore
